"""PySpark tier: a CkptError raised inside a Spark task reaches the driver as the same one
line as on this machine, not as a PythonException carrying the executor's traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CASES, run_cli
from tests.spark_support import spark  # noqa: F401 - the session fixture
from tests.test_crashes import copy_hdfs, damage_latest_delta, one_line_error

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not CASES, reason="no fixtures")]


def test_corrupt_delta_on_spark_is_the_local_one_line(spark: Any, tmp_path: Path) -> None:  # noqa: F811
    root = copy_hdfs(tmp_path)
    damaged = damage_latest_delta(root, 1)
    local = run_cli("replay", str(root), "-O", f"{tmp_path}/local/", "--workers", "2")
    remote = run_cli("replay", str(root), "-O", f"{tmp_path}/spark/", "--engine", "spark")
    assert damaged in one_line_error(remote)
    assert one_line_error(remote) == one_line_error(local)
