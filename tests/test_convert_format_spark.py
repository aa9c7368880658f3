"""PySpark tier: Spark judges ``ckpt convert --format-version`` (RocksDB checkpoint format v1
<-> v2), with the Spark versions a move involves.

(a) Spark 4.3's ``statestore`` reader on the converted checkpoint reads, at the conversion
batch, the rows it read at the batch before, store for store; (b) the real query restarted
on it by Spark 4.3 and fed two more input files emits what the untouched query emits, and
goes on in the new format (Spark 4.3 takes the format from the newest commit, not from the
session); (c) a Spark 4.0 format-v2 checkpoint, whose zips Spark 4.1+ cannot read, restarts
on 4.3 after ``--format-version 2`` and on 4.0 after ``--format-version 1``, emitting what
Spark 4.0 emits on the untouched copy; a Spark 4.3 format-v2 checkpoint moved to v1
restarts on Spark 4.0 (PySpark 4.0.5 from ``.fixture-venvs/``, see ``tests/other_spark.py``).
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Case, fixture_case, run_cli
from tests.fixture_copies import age_everything
from tests.fixture_queries import beside_control, recorded_input, restart
from tests.other_spark import have, restart_with
from tests.spark_support import spark  # noqa: F401 - the session fixture
from tests.test_convert_spark import emitted_rows, saved_reads, saved_rows, spark_rows

pytestmark = pytest.mark.slow

FORMAT_VERSION = "spark.sql.streaming.stateStore.checkpointFormatVersion"
# (fixture, ckpt convert's arguments): each way, with and without changelog checkpointing,
# a four-store join, session windows (keys scanned by prefix), into v2 from HDFS and out of
# v2 into HDFS.
CASES = [
    ("spark4-rocksdb-v2", ["--format-version", "1"]),
    ("spark4-rocksdb-changelog", ["--format-version", "2"]),
    ("spark4-rocksdb-agg", ["--format-version", "2"]),
    ("spark4-join-v2-rocksdb", ["--format-version", "2"]),
    ("spark4-session-rocksdb", ["--format-version", "2"]),
    ("spark4-hdfs-agg", ["--provider", "rocksdb", "--format-version", "2"]),
    ("spark4-rocksdb-v2", ["--provider", "hdfs"]),
]
RESTARTED = [CASES[0], CASES[1], CASES[3], CASES[4], CASES[5], CASES[6]]


def converted(case: Case, change: list[str], dest: Path) -> Path:
    shutil.copytree(case.checkpoint, dest)
    age_everything(dest)
    result = run_cli("convert", str(dest), *change, "--apply", "--yes")
    assert result.exit_code == 0, result.stdout + result.stderr
    return dest


def newest_commit(ckpt: Path) -> tuple[int, str]:
    """The newest commit's batch and header (``v1``/``v2``)."""
    batch = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    return batch, (ckpt / "commits" / str(batch)).read_text().split("\n", 1)[0]


def target_format(change: list[str]) -> int:
    return 2 if change[-2:] == ["--format-version", "2"] else 1


@pytest.mark.parametrize(("name", "change"), CASES)
def test_spark_reads_the_converted_state_as_before(
    spark: Any,  # noqa: F811 - the session fixture
    name: str,
    change: list[str],
    tmp_path: Path,
) -> None:
    case = fixture_case(name)
    out = converted(case, change, tmp_path / "ckpt")
    newest, header = newest_commit(out)
    assert header == f"v{target_format(change)}"
    reads = saved_reads(case, newest - 1)
    assert reads, f"{name}: no saved read of batch {newest - 1}"
    # Spark 4.1+ reads format v2 by batchId only with the session set to it.
    spark.conf.set(FORMAT_VERSION, str(target_format(change)))
    try:
        for read in reads:
            options = {**read["reader_options"], "batchId": str(newest)}
            if "snapshotStartBatchId" in options:
                # The conversion wrote a full snapshot; reading across the two formats is
                # refused (STDS_MIXED_CHECKPOINT_FORMAT_VERSIONS_NOT_SUPPORTED).
                options["snapshotStartBatchId"] = str(newest)
            assert spark_rows(spark, out, options) == saved_rows(case, read), read["rows_file"]
    finally:
        spark.conf.unset(FORMAT_VERSION)


@pytest.mark.parametrize(("name", "change"), RESTARTED)
def test_the_restarted_query_emits_what_the_untouched_one_does_in_its_new_format(
    spark: Any,  # noqa: F811 - the session fixture
    name: str,
    change: list[str],
    tmp_path: Path,
) -> None:
    case = fixture_case(name)
    ours = converted(case, change, tmp_path / "ours")
    converted_at, _ = newest_commit(ours)
    # The case's own settings: a v2 fixture's session still says checkpointFormatVersion=2.
    want, got = beside_control(spark, case, ours, tmp_path / "control")
    assert any(want.values())
    assert emitted_rows(got) == emitted_rows(want)
    newest, header = newest_commit(ours)
    assert newest > converted_at and header == f"v{target_format(change)}"
    assert run_cli("validate", str(ours)).exit_code == 0


needs_spark40 = pytest.mark.skipif(
    not have("4.0") and not os.environ.get("CKPT_REQUIRE_OTHER_SPARK"),
    reason="no PySpark 4.0 in .fixture-venvs/spark40 (./scripts/bootstrap spark installs it)",
)


@needs_spark40
def test_a_spark40_checkpoint_restarts_on_43_after_v2_and_on_40_after_v1(
    spark: Any,  # noqa: F811 - the session fixture
    tmp_path: Path,
) -> None:
    """``spark40-rocksdb-v2``: zips with metadata v2, which Spark 4.3 fails on."""
    case = fixture_case("spark40-rocksdb-v2")
    control, untouched = tmp_path / "control", tmp_path / "untouched"
    shutil.copytree(case.checkpoint, control)
    shutil.copytree(case.checkpoint, untouched)
    report = run_cli("validate", str(untouched), "--json").json()
    (finding,) = [f for f in report["findings"] if f["code"] == "ZIP_METADATA_V2"]
    assert "--format-version" in finding["hint"]
    v2 = converted(case, ["--format-version", "2"], tmp_path / "v2")
    v1 = converted(case, ["--format-version", "1"], tmp_path / "v1")
    with recorded_input(case, extra_steps=2) as input_dir:
        want = restart_with("4.0", case, control, input_dir, {})
        assert want["ok"], want["error"]
        with pytest.raises(Exception, match="CANNOT_LOAD_STATE_STORE|Expected v1"):
            restart(spark, case, input_dir, untouched)
        on_43 = restart(spark, case, input_dir, v2)
        on_40 = restart_with("4.0", case, v1, input_dir, {FORMAT_VERSION: "1"})
    assert on_40["ok"], on_40["error"]
    assert any(want["emitted"].values())
    assert emitted_rows(on_43) == emitted_rows(want["emitted"])
    assert emitted_rows(on_40["emitted"]) == emitted_rows(want["emitted"])
    assert newest_commit(v2)[1] == "v2" and newest_commit(v1)[1] == "v1"


@needs_spark40
def test_a_spark43_v2_checkpoint_moved_to_v1_restarts_on_spark40(
    spark: Any,  # noqa: F811 - the session fixture
    tmp_path: Path,
) -> None:
    """Spark 4.0 cannot read Spark 4.3's format-v2 zips (it expects metadata v2 there);
    after ``--format-version 1`` it restarts the query, with 4.3's output."""
    case = fixture_case("spark4-rocksdb-v2")
    control, untouched = tmp_path / "control", tmp_path / "untouched"
    shutil.copytree(case.checkpoint, control)
    shutil.copytree(case.checkpoint, untouched)
    v1 = converted(case, ["--format-version", "1"], tmp_path / "v1")
    with recorded_input(case, extra_steps=2) as input_dir:
        want = restart(spark, case, input_dir, control)
        before = restart_with("4.0", case, untouched, input_dir, {})
        on_40 = restart_with("4.0", case, v1, input_dir, {FORMAT_VERSION: "1"})
    assert not before["ok"]
    assert on_40["ok"], on_40["error"]
    assert any(want.values())
    assert emitted_rows(on_40["emitted"]) == emitted_rows(want)


def test_spark_fails_where_validate_says_a_unique_id_zip_breaks_a_v1_restart(
    spark: Any,  # noqa: F811 - the session fixture
    tmp_path: Path,
) -> None:
    case = fixture_case("spark4-rocksdb-changelog")
    root = tmp_path / "ckpt"
    shutil.copytree(case.checkpoint, root)
    zip_file = sorted((root / "state/0/1").glob("*.zip"))[-1]
    shutil.copy(zip_file, zip_file.with_name(f"{zip_file.stem}_{uuid.uuid4()}.zip"))
    assert run_cli("validate", str(root)).exit_code == 1
    with (
        recorded_input(case, extra_steps=1) as input_dir,
        pytest.raises(Exception, match="CANNOT_LOAD_STATE_STORE"),
    ):
        restart(spark, case, input_dir, root)


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("spark4-tws-row-v2", ["--format-version", "1"]),
        ("spark4-tws-row", ["--format-version", "2"]),
    ],
)
# transformWithState's runner warns of pandas 3 (the query runs all the same).
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support")
def test_a_transform_with_state_query_changes_format(
    spark: Any,  # noqa: F811 - the session fixture
    name: str,
    change: list[str],
    tmp_path: Path,
) -> None:
    """Its column families (values, lists, maps, timers, TTL) move as they are. A copy of a
    transformWithState checkpoint names its schema files in the fixture's home, so both the
    control and the converted copy are relocated first (``ckpt relocate``)."""
    case = fixture_case(name)
    control, ours = tmp_path / "control", tmp_path / "ours"
    for home in (control, ours):
        moved = run_cli("relocate", str(case.checkpoint), str(home), "--apply", "--yes", "--force")
        assert moved.exit_code == 0, moved.stdout + moved.stderr
    result = run_cli("convert", str(ours), *change, "--apply", "--yes")
    assert result.exit_code == 0, result.stdout + result.stderr
    converted_at, header = newest_commit(ours)
    assert header == f"v{target_format(change)}"
    with recorded_input(case, extra_steps=2) as input_dir:
        want = restart(spark, case, input_dir, control)
        got = restart(spark, case, input_dir, ours)
    assert any(want.values())
    assert emitted_rows(got) == emitted_rows(want)
    assert newest_commit(ours)[0] > converted_at
    assert newest_commit(ours)[1] == f"v{target_format(change)}"
    assert run_cli("validate", str(ours)).exit_code == 0
