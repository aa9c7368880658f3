"""PySpark tier: Spark itself judges ``ckpt repartition``'s output.

(a) Spark's ``statestore`` reader on ckpt's output reads, key for key and partition for
partition, what it read after Spark's own repartition of the same fixture
(``fixtures/repartition/<case>-to<M>/``, made by ``fixtures/generate_repartition.py``; for the
HDFS-backed store, which Spark refuses, the rows placed by Spark SQL's ``pmod(hash(key), M)``);
(b) the real query, restarted on ckpt's output and fed two more input files, emits what it
emits restarted on Spark's own repartition of a copy (HDFS: on the unrepartitioned
checkpoint); (c) ``ckpt validate`` is clean after and ``--undo`` gives back every byte.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.formats.tws import parse_operator_metadata_v2
from tests.conftest import REPO, Case, run_cli
from tests.fixture_copies import age_everything
from tests.fixture_queries import GEN, recorded_input, restart
from tests.kill_support import tree
from tests.spark_support import spark  # noqa: F401 - the session fixture

pytestmark = pytest.mark.slow

FIXTURES = REPO / "fixtures"
ORACLE = FIXTURES / "repartition"
FORMAT_VERSION = "spark.sql.streaming.stateStore.checkpointFormatVersion"
# RocksDB (no changelog, changelog, format v2), a join in state format 3, transformWithState
# with timers, and the HDFS-backed store; to 3 partitions and to 1.
CASES = [
    "spark4-rocksdb-agg-to3",
    "spark4-rocksdb-changelog-to1",
    "spark4-rocksdb-v2-to3",
    "spark4-join-v3-rocksdb-to3",
    "spark4-tws-row-to3",
    "spark4-hdfs-agg-to3",
]


def source(name: str) -> Case:
    root = FIXTURES / "checkpoints" / name
    assert (root / "checkpoint").is_dir(), f"no fixture {name}"
    return Case(name, root)


def oracle(name: str) -> dict[str, Any]:
    path = ORACLE / name / "expected.json"
    if not path.is_file():
        pytest.skip(f"no saved Spark repartition {name}")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def recorded_location(case: Case) -> Path | None:
    """Where the query ran, when its operator metadata v2 names schema files by absolute URL
    (transformWithState): Spark's reader opens them there, so the copy must be there."""
    for meta in sorted((case.checkpoint / "state").glob("*/_metadata/v2/[0-9]*")):
        parsed = parse_operator_metadata_v2(str(meta), meta.read_bytes())
        for store in parsed.stores:
            for url in store.schema_file_paths:
                return Path(url.removeprefix("file:")).parents[4]
    return None


@contextmanager
def work_dir(case: Case, tmp_path: Path) -> Iterator[Path]:
    """A place for the copy of ``case`` to repartition: its recorded location if it has one
    (emptied before and after), else under ``tmp_path``."""
    where = recorded_location(case)
    if where is None:
        yield tmp_path / "ckpt"
        return
    shutil.rmtree(where, ignore_errors=True)
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)
        shutil.rmtree(f"{where}.ckpt-quarantine", ignore_errors=True)


def ckpt_repartition(case: Case, partitions: int, dest: Path) -> Path:
    shutil.copytree(case.checkpoint, dest)
    age_everything(dest)
    result = run_cli(
        "repartition", str(dest), "--partitions", str(partitions), "--apply", "--yes", "--force"
    )
    assert result.exit_code == 0, result.stdout + result.stderr
    return dest


def read_rows(
    session: Any, ckpt: Path, options: dict[str, str], confs: dict[str, str]
) -> list[str]:
    """Every partition's rows in one read, as fixtures/generate.py writes them."""
    for key, value in confs.items():
        session.conf.set(key, value)
    try:
        reader = session.read.format("statestore")
        for key, value in options.items():
            reader = reader.option(key, value)
        rows = reader.load(str(ckpt)).collect()
    finally:
        for key in confs:
            session.conf.unset(key)
    return sorted(json.dumps(GEN.row_to_json(r)) for r in rows)


@pytest.mark.parametrize("name", CASES)
def test_spark_reads_ckpt_output_as_after_its_own(
    spark: Any,  # noqa: F811 - the session fixture
    name: str,
    tmp_path: Path,
) -> None:
    expected = oracle(name)
    case = source(expected["source_case"])
    partitions = int(expected["num_partitions"])
    before = tree(case.checkpoint)
    confs = {}
    if case.expected["confs"].get(FORMAT_VERSION) == "2":
        confs[FORMAT_VERSION] = "2"
    with work_dir(case, tmp_path) as where:
        out = ckpt_repartition(case, partitions, where)
        for read in expected["reads"]:
            want = (ORACLE / name / "state" / f"{read['file']}.jsonl").read_text().splitlines()
            got = read_rows(spark, out, read["reader_options"], confs)
            assert got == sorted(want), read["file"]
            assert {json.loads(r)["partition_id"] for r in got} <= set(range(partitions))
        validated = run_cli("validate", str(out))
        assert validated.exit_code == 0, validated.stdout
        undone = run_cli("repartition", str(out), "--undo", "--yes")
        assert undone.exit_code == 0, undone.stdout + undone.stderr
        assert tree(out) == before


def emitted_rows(emitted: dict[int, list[str]]) -> list[list[str]]:
    """The rows of each batch that emitted any, in batch order."""
    return [emitted[b] for b in sorted(emitted) if emitted[b]]


@pytest.mark.parametrize(
    ("name", "against"),
    [("spark4-rocksdb-agg-to3", "spark"), ("spark4-hdfs-agg-to3", "unrepartitioned")],
)
def test_restarted_query_emits_what_it_emits_after_sparks_repartition(
    spark: Any,  # noqa: F811 - the session fixture
    name: str,
    against: str,
    tmp_path: Path,
) -> None:
    expected = oracle(name)
    case = source(expected["source_case"])
    partitions = int(expected["num_partitions"])
    ours = ckpt_repartition(case, partitions, tmp_path / "ckpt")
    theirs = tmp_path / against
    shutil.copytree(case.checkpoint, theirs)
    if against == "spark":
        spark._streamingCheckpointManager.repartition(str(theirs), partitions)
    with recorded_input(case, extra_steps=2) as input_dir:
        want = restart(spark, case, input_dir, theirs)
        got = restart(spark, case, input_dir, ours)
    assert any(want.values())
    if against == "spark":
        assert got == want  # the same batch ids: both resume after the repartition batch
    else:
        assert emitted_rows(got) == emitted_rows(want)
    # The query ran with the new count: its next offsets entry pins it.
    newest = max(int(p.name) for p in (ours / "offsets").iterdir() if p.name.isdigit())
    conf = json.loads((ours / "offsets" / str(newest)).read_text().splitlines()[1])["conf"]
    assert conf["spark.sql.shuffle.partitions"] == str(partitions)
