"""PySpark tier: for damaged source logs, ``ckpt validate`` says the query cannot restart
exactly when the real query fails to restart on the checkpoint."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CASES, run_cli
from tests.fixture_queries import recorded_input, restart
from tests.spark_support import spark  # noqa: F401 - the session fixture
from tests.test_validate_sources import cut_last_entry, drop_last_line

pytestmark = pytest.mark.slow

BY_NAME = {c.name: c for c in CASES}


def cut_latest_batch_file(root: Path) -> None:
    cut_last_entry(root / "sources/0/5")


def remove_batch_file(root: Path) -> None:
    (root / "sources/0/3").unlink()
    (root / "sources/0/.3.crc").unlink()


def cut_batch_file_before_compact(root: Path) -> None:
    cut_last_entry(root / "sources/0/8")


def stale_crc_of_compact_file(root: Path) -> None:
    path = root / "sources/0/9.compact"
    path.write_bytes(path.read_bytes().replace(b'"batchId":9', b'"batchId":8'))


def newer_version_header(root: Path) -> None:
    path = root / "sources/0/5"
    path.write_bytes(b"v2" + path.read_bytes()[2:])
    (root / "sources/0/.5.crc").unlink()


def remove_batch_the_offsets_name(root: Path) -> None:
    (root / "sources/0/5").unlink()
    (root / "sources/0/.5.crc").unlink()


def cut_compact_file(root: Path) -> None:
    cut_last_entry(root / "sources/0/9.compact")


def cut_compact_file_at_line_end(root: Path) -> None:
    drop_last_line(root / "sources/0/9.compact")


# (fixture, damage, Spark restarts?, validate OK?)
SCENARIOS: list[tuple[str, Callable[[Path], None], bool, bool]] = [
    ("spark4-crash-hdfs", cut_latest_batch_file, False, False),
    ("spark4-crash-hdfs", remove_batch_file, False, False),
    ("spark4-crash-hdfs", newer_version_header, False, False),
    ("spark4-crash-hdfs", remove_batch_the_offsets_name, False, False),
    ("spark4-hdfs-agg", cut_compact_file, False, False),
    ("spark4-hdfs-agg", cut_batch_file_before_compact, True, True),
    ("spark4-hdfs-agg", cut_compact_file_at_line_end, True, True),
    # FileContextBasedCheckpointFileManager reads through a FileContext, which does not
    # verify Hadoop .crc files: the restart succeeds, on a file list changed after Spark
    # wrote it. validate cannot tell a stale checksum from a changed file: an error.
    ("spark4-hdfs-agg", stale_crc_of_compact_file, True, False),
]


@pytest.mark.parametrize(
    ("name", "damage", "restarts", "validate_ok"),
    [pytest.param(n, d, r, ok, id=f"{n}-{d.__name__}") for n, d, r, ok in SCENARIOS],
)
def test_validate_agrees_with_spark_on_source_logs(
    spark: Any,  # noqa: F811 - the session fixture
    name: str,
    damage: Callable[[Path], None],
    restarts: bool,
    validate_ok: bool,
    tmp_path: Path,
) -> None:
    case = BY_NAME[name]
    root = tmp_path / "checkpoint"
    shutil.copytree(case.checkpoint, root)
    damage(root)
    result = run_cli("validate", str(root), "--json")
    assert result.json()["ok"] == validate_ok, result.stdout
    with recorded_input(case) as input_dir:
        if restarts:
            assert any(restart(spark, case, input_dir, root).values())
        else:
            with pytest.raises(Exception):  # noqa: B017 - any StreamingQueryException
                restart(spark, case, input_dir, root)
