"""Spark (Hadoop's local file system) reads through a symbolic link in a checkpoint and fails on
a dangling one; validate's verdict matches (SYMLINK: a warning, an error when dangling)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CASES, run_cli
from tests.fixture_queries import recorded_input, restart
from tests.spark_support import spark  # noqa: F401 - the session fixture
from tests.test_validate_links import link_sst_dir_out

pytestmark = pytest.mark.slow

BY_NAME = {c.name: c for c in CASES}


@pytest.mark.parametrize("dangling", [False, True], ids=["linked", "dangling"])
def test_validate_agrees_with_spark_on_a_linked_sst_directory(
    spark: Any,  # noqa: F811 - the session fixture
    dangling: bool,
    tmp_path: Path,
) -> None:
    case = BY_NAME["spark4-rocksdb-agg"]
    root = tmp_path / "checkpoint"
    shutil.copytree(case.checkpoint, root)
    target = link_sst_dir_out(root, tmp_path)
    if dangling:
        target.rename(tmp_path / "moved-away")
    report = run_cli("validate", str(root), "--json").json()
    assert report["ok"] == (not dangling), report["findings"]
    assert [f["code"] for f in report["findings"]] == ["SYMLINK"]
    with recorded_input(case) as input_dir:
        if dangling:
            # Reading an SST of the version to load through the link.
            with pytest.raises(Exception, match=r"FileNotFoundException.*SSTs/.*\.sst"):
                restart(spark, case, input_dir, root)
        else:
            assert any(restart(spark, case, input_dir, root).values())
