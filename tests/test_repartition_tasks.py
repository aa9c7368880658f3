"""``ckpt repartition`` on a distributed engine (:mod:`ckpt_cli.repartition.tasks`), here with
pickled tasks on this machine standing in for Spark (the Spark run is in
``test_repartition_engine_spark.py``): the same rows per new partition and the same log bytes
as the local engine, the staging only ever in the quarantine, and gone at the end."""

from __future__ import annotations

import json
import pickle
import re
import shutil
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ckpt_cli.change.flow import Guards
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.engine import Engine, LocalEngine
from ckpt_cli.repartition.run import RepartitionRun, run_repartition, undo_repartition
from ckpt_cli.replay import read_state
from ckpt_cli.state.reader import covering_reads
from ckpt_cli.storage import Storage
from ckpt_cli.validate import validate
from tests.conftest import REPO
from tests.fixture_copies import age_everything, in_memory_store, memory_objects
from tests.kill_support import tree

T = TypeVar("T")
R = TypeVar("R")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class Tasks(LocalEngine):
    """Tasks run one by one on pickled copies of their function, units and shared data
    (what Spark ships), their results pickled back; recording the files under ``watch``
    after each round of tasks."""

    name = "tasks"

    def __init__(self, watch: Path | Callable[[], set[str]]) -> None:
        super().__init__(workers=1)
        self.look = watch if callable(watch) else lambda: files_under(watch)
        self.seen: list[set[str]] = []

    def map(self, fn: Callable[[T], R], units: Sequence[T], **kw: Any) -> list[R]:
        fn, units = pickle.loads(pickle.dumps((fn, list(units))))
        kw["initargs"] = pickle.loads(pickle.dumps(kw.get("initargs", ())))
        out: list[R] = pickle.loads(pickle.dumps(super().map(fn, units, **kw)))
        self.seen.append(self.look())
        return out


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def copy(name: str, dest: Path) -> Path:
    shutil.copytree(REPO / "fixtures" / "checkpoints" / name / "checkpoint", dest)
    age_everything(dest)
    return dest


def rows_by_partition(path: Path) -> Counter[str]:
    """Every row of the state at the last committed batch, with its partition."""
    ckpt = Checkpoint.open(str(path))
    rows: Counter[str] = Counter()
    for op in ckpt.operators:
        reads = covering_reads(ckpt, op)
        if reads == [{}]:
            reads = [{"store": store} for store in ckpt.operators[op].stores]
        for read in reads:
            for row in read_state(ckpt, operator=op, **read):
                rows[json.dumps([op, read, row], sort_keys=True, default=str)] += 1
    return rows


def repartition_both(
    name: str, partitions: int, engine: Engine, tmp_path: Path
) -> tuple[Path, Path, RepartitionRun, RepartitionRun]:
    """The same fixture repartitioned on the local engine and on ``engine``."""
    local = copy(name, tmp_path / "local" / "ckpt")
    other = copy(name, tmp_path / "other" / "ckpt")
    a = run_repartition(Storage.from_url(str(local)), Guards(apply=True), partitions=partitions)
    b = run_repartition(
        Storage.from_url(str(other)), Guards(apply=True), partitions=partitions, engine=engine
    )
    return local, other, a, b


def assert_same_result(
    local: Path, other: Path, a: RepartitionRun, b: RepartitionRun, *, v2: bool = False
) -> None:
    assert a.result is not None and b.result is not None
    # Keys and bytes per partition, files to write (all but where the checkpoint is).
    assert {**b.plan.body_json(), "checkpoint": ""} == {**a.plan.body_json(), "checkpoint": ""}
    assert rows_by_partition(other) == rows_by_partition(local)
    for rel in a.plan.log_files:
        if not (v2 and rel.startswith("commits/")):  # v2: names each new file's uniqueId
            assert (other / rel).read_bytes() == (local / rel).read_bytes(), rel

    # The same files (SSTs and format-v2 zips are named with fresh UUIDs) of the same sizes
    # (a zip's varies run to run, on either engine: RocksDB's own ids in it), byte for byte
    # where nothing random is in them (HDFS snapshots).
    def shape(written: dict[str, int]) -> list[tuple[str, int]]:
        return sorted(
            (UUID.sub("<uuid>", p), -1 if p.endswith(".zip") else s) for p, s in written.items()
        )

    assert shape(b.result.written) == shape(a.result.written)
    for rel in a.result.written:
        if rel.endswith(".snapshot"):
            assert (other / rel).read_bytes() == (local / rel).read_bytes(), rel
    assert b.result.validation.ok and validate(Checkpoint.open(str(other))).ok


@pytest.mark.parametrize(
    ("name", "partitions"), [("spark4-hdfs-agg", 3), ("spark4-rocksdb-agg", 3)]
)
def test_tasks_give_the_local_result_and_stage_outside_the_checkpoint(
    name: str, partitions: int, tmp_path: Path
) -> None:
    engine = Tasks(tmp_path / "other")
    other_before = tree(copy(name, tmp_path / "pristine"))
    local, other, a, b = repartition_both(name, partitions, engine, tmp_path)
    assert_same_result(local, other, a, b)

    # Staged by the tasks (records, then built files), in the quarantine only.
    assert len(engine.seen) == 2
    staged = set().union(*engine.seen) - set(tree(tmp_path / "other")) - {"ckpt/.ckpt-lock"}
    pattern = re.compile(r"ckpt\.ckpt-quarantine/repartition-[0-9TZ]+/staging/")
    assert staged and not [p for p in staged if not pattern.match(p)]
    assert any("/staging/records/" in p for p in staged)
    assert any("/staging/files/" in p for p in staged)
    # ... and gone at the end; no file of it in the checkpoint.
    (quarantine,) = (tmp_path / "other").glob("ckpt.ckpt-quarantine/repartition-*")
    assert not (quarantine / "staging").exists()
    assert not [p for p in tree(other) if "staging" in p]

    undo_repartition(Storage.from_url(str(other)))
    assert tree(other) == other_before


def test_a_dry_run_on_tasks_writes_nothing(tmp_path: Path) -> None:
    path = copy("spark4-rocksdb-v2", tmp_path / "ckpt")
    local = run_repartition(Storage.from_url(str(path)), partitions=3)
    before = tree(tmp_path)
    engine = Tasks(tmp_path)
    run = run_repartition(Storage.from_url(str(path)), partitions=3, engine=engine)
    assert run.plan.body_json() == local.plan.body_json()
    assert tree(tmp_path) == before and len(engine.seen) == 1


def test_tasks_on_an_object_store(tmp_path: Path) -> None:
    """memory:// (an object store): the tasks stage under the quarantine prefix, the built
    objects are moved in, the staging prefix is removed, --undo restores every object."""
    src = REPO / "fixtures" / "checkpoints" / "spark4-rocksdb-v2" / "checkpoint"
    with in_memory_store(src, "tasks-test") as (fs, before):
        storage = Storage.from_url("memory://tasks-test")
        local = run_repartition(storage, partitions=3)
        engine = Tasks(lambda: set(fs.find("/tasks-test.ckpt-quarantine")))
        run = run_repartition(storage, Guards(apply=True, force=True), partitions=3, engine=engine)
        assert run.result is not None and run.result.validation.ok
        assert run.plan.body_json() == local.plan.body_json()
        staged = [k for k in engine.seen[-1] if "/staging/files/" in k]
        assert len(staged) == len(run.result.written) - 3  # all but offsets, metadata, commit
        assert fs.exists(run.result.manifest)
        assert not [k for k in fs.find("/tasks-test.ckpt-quarantine") if "/staging/" in k]
        undo_repartition(storage)
        assert memory_objects(fs, "tasks-test") == before
