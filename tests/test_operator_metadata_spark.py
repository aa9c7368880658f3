"""Spark 4.3 restarts on an unreadable ``state/<op>/_metadata/metadata`` (it catches the error
reading it and logs a warning), and validate's verdict matches: a warning, not an error."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CASES, run_cli
from tests.fixture_queries import recorded_input, restart
from tests.spark_support import spark  # noqa: F401 - the session fixture
from tests.test_validate_links import (
    OPERATOR_METADATA,
    damage_operator_metadata,
    emptied,
    garbage_json,
)

pytestmark = pytest.mark.slow

BY_NAME = {c.name: c for c in CASES}


@pytest.mark.parametrize("damage", [garbage_json, emptied])
def test_validate_agrees_with_spark_on_unreadable_operator_metadata(
    spark: Any,  # noqa: F811 - the session fixture
    damage: Callable[[Path], None],
    tmp_path: Path,
) -> None:
    case = BY_NAME["spark4-hdfs-agg"]
    root = tmp_path / "checkpoint"
    shutil.copytree(case.checkpoint, root)
    damage_operator_metadata(root, damage)
    damaged = (root / OPERATOR_METADATA).read_bytes()
    result = run_cli("validate", str(root), "--json")
    assert result.json()["ok"], result.stdout
    with recorded_input(case) as input_dir:
        emitted = restart(spark, case, input_dir, root)
    assert any(emitted.values())
    # Spark neither fails nor rewrites it.
    assert (root / OPERATOR_METADATA).read_bytes() == damaged
