"""``ckpt state delete`` on a distributed engine, with the tasks run here on pickled copies of
what Spark would ship (``Tasks``), and on process pools of 1-3 workers with slow and failing
tasks: the same plan and the same state as the deletion on one machine, every file written
in the staging beside the checkpoint (never in it), the staging gone after, the checkpoint
valid, and ``--undo`` back to every byte. A task that fails stops the deletion before
anything changed in the checkpoint. (``test_delete_engine_spark.py`` runs it on Spark.)"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.change.flow import Guards
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.core.read import iter_state
from ckpt_cli.core.rebuild import plan_version
from ckpt_cli.core.unfinished import batch_partitions
from ckpt_cli.delete.plan import SAMPLE_ROWS
from ckpt_cli.delete.run import run_delete, undo_delete
from ckpt_cli.engine import LocalEngine
from ckpt_cli.errors import CkptError
from tests.conftest import CASES_DIR, run_cli
from tests.fixture_copies import age_everything, latest
from tests.kill_support import tree
from tests.test_convert_tasks import masked
from tests.test_repartition_tasks import Tasks, files_under

pytestmark = pytest.mark.skipif(not CASES_DIR.is_dir(), reason="no fixtures")

# (fixture, --where, other arguments)
CHANGES: list[tuple[str, str, dict[str, Any]]] = [
    ("spark4-hdfs-agg", "key.k in ('k0', 'k5') or value.count > 5", {}),
    ("spark4-rocksdb-agg", "key.k = 'k3'", {}),  # a new zip of the keys left
    ("spark4-rocksdb-v2", "key.k in ('k1', 'k2')", {}),  # format v2: ids and lineage
    ("spark4-multi-op", "key.k = 'k1'", {}),
    ("spark4-session-rocksdb", "key.k = 'k1'", {}),
    ("spark4-join", "key.field0 = 'k1'", {}),
    ("spark4-join-v4-rocksdb", "key.field0 = 'k1'", {}),
    ("spark4-tws-row", "key.k = 'k1'", {}),
    ("spark4-tws-pandas", "value.n > 3", {"state_var": "cnt"}),
]


def copy(name: str, dest: Path) -> Path:
    """A copy that names its own schema files (relocated when it is transformWithState)."""
    source = CASES_DIR / name / "checkpoint"
    if "tws" in name:
        moved = run_cli("relocate", str(source), str(dest), "--apply", "--yes")
        assert moved.exit_code == 0, moved.stderr
    else:
        shutil.copytree(source, dest)
    age_everything(dest)
    return dest


def state(root: Path, operator: int = 0) -> list[str]:
    """Every record of the newest version of every store partition, raw."""
    ckpt = Checkpoint.open(str(root))
    version = latest(root) + 1
    out = []
    for op_id, op in ckpt.operators.items():
        for name, store in op.stores.items():
            for p in batch_partitions(ckpt, store):  # not those a repartition left over
                plan = plan_version(ckpt, op_id, p, version, store=name)
                out += [
                    f"{op_id}/{name}/{p} {k.hex()} {v.hex()}" for k, v in iter_state(ckpt, plan)
                ]
    return sorted(out)


@pytest.mark.parametrize(("name", "where", "extra"), CHANGES)
def test_tasks_delete_what_one_machine_deletes(
    name: str, where: str, extra: dict[str, Any], tmp_path: Path
) -> None:
    here = copy(name, tmp_path / "here" / "ckpt")
    there = copy(name, tmp_path / "there" / "ckpt")
    original = tree(there)
    engine = Tasks(tmp_path / "there")
    audits = [tmp_path / "here.jsonl", tmp_path / "there.jsonl"]
    a = run_delete(
        Checkpoint.open(str(here)).storage,
        Guards(apply=True),
        operator=0,
        where=where,
        output=str(audits[0]),
        **extra,
    )
    b = run_delete(
        Checkpoint.open(str(there)).storage,
        Guards(apply=True),
        operator=0,
        where=where,
        output=str(audits[1]),
        engine=engine,
        **extra,
    )
    assert a.result is not None and b.result is not None
    assert b.result.validation.ok, b.result.validation
    assert b.result.removed == a.result.removed > 0
    assert b.plan.body_json() | {"output": None, "checkpoint": None} == (
        a.plan.body_json() | {"output": None, "checkpoint": None}
    )
    assert audits[0].read_text() == audits[1].read_text()
    assert state(there) == state(here)
    # Both rounds of tasks ran (matching, writing), and the written files were staged
    # beside the checkpoint, never in it; the staging is gone.
    assert len(engine.seen) == 2
    staged = {p for p in engine.seen[1] if "/staging/" in p}
    assert staged and all(p.startswith("ckpt.ckpt-quarantine/") for p in staged)
    assert not [p for p in files_under(tmp_path / "there") if "/staging/" in p]
    # The same files, their checksums included, but for the uuids in their names.
    assert masked(b.result.written) == masked(a.result.written)
    undo_delete(Checkpoint.open(str(there)).storage)
    assert tree(there) == original


def _slow_or_failing(fn: Any, fail: set[int], slow: float) -> Any:
    """``fn`` that sleeps ``slow`` seconds on even units and raises on the ``fail``-th."""

    def task(unit: Any) -> Any:
        index = unit[0] if isinstance(unit, tuple) else unit
        if index in fail:
            raise RuntimeError("a task failed")
        if index % 2 == 0:
            time.sleep(slow)
        return fn(unit)

    return task


class Varying(LocalEngine):
    """A distributed engine of ``workers``: processes (what the tasks are), or, to make the
    tasks of ``round_`` slow on even units and fail on the units in ``fail``, threads
    running the wrapped task (a closure does not pickle)."""

    name = "varying"

    def __init__(self, workers: int, round_: str, fail: set[int] | None, slow: float) -> None:
        super().__init__(workers)
        self.round, self.fail, self.slow = round_, fail, slow

    def map(self, fn: Any, units: Any, **kw: Any) -> Any:
        if fn.__name__ == self.round and self.fail is not None:
            fn = _slow_or_failing(fn, self.fail, self.slow)
            kw["cpu_bound"] = False
        return super().map(fn, units, **kw)


@pytest.mark.parametrize("workers", [1, 3])
@pytest.mark.parametrize("round_", ["_match_unit", "_write_unit"])
@pytest.mark.parametrize("fail", [None, set(), {0}, {150}])
def test_pools_of_any_size_with_slow_and_failing_tasks(
    workers: int, round_: str, fail: set[int] | None, tmp_path: Path
) -> None:
    """200 partitions on process pools (``fail`` None) or threads with slow tasks: results
    come back in partition order whatever finishes first; a failing task of either round
    leaves the checkpoint as it was and no staging."""
    name, where = "spark4-hdfs-agg-200", "value.count = 1"
    root = copy(name, tmp_path / "ckpt")
    original = tree(root)
    engine = Varying(workers, round_, fail, 0.002)
    storage = Checkpoint.open(str(root)).storage
    if fail:
        with pytest.raises(RuntimeError, match="a task failed"):
            run_delete(storage, Guards(apply=True), operator=0, where=where, engine=engine)
        left = tree(root)
        left.pop(".ckpt-lock", None)
        assert left == original
        assert not list(tmp_path.glob("*.ckpt-quarantine/*/staging"))
        return
    here = copy(name, tmp_path / "here")
    run_delete(Checkpoint.open(str(here)).storage, Guards(apply=True), operator=0, where=where)
    done = run_delete(storage, Guards(apply=True), operator=0, where=where, engine=engine)
    assert done.result is not None and done.result.validation.ok
    assert [p.partition for p in done.plan.partitions] == list(range(200))
    assert state(root) == state(here)


def test_tasks_return_only_the_rows_that_are_used(tmp_path: Path) -> None:
    """Without --output a task returns a sample's worth of rows, not every removed row (a
    deletion of most keys would ship them all to the driver); the plan is the local one."""
    here = copy("spark4-hdfs-agg", tmp_path / "here" / "ckpt")
    there = copy("spark4-hdfs-agg", tmp_path / "there" / "ckpt")
    returned: list[int] = []

    class Counting(Tasks):
        def map(self, fn: Any, units: Any, **kw: Any) -> Any:
            out = super().map(fn, units, **kw)
            if fn.__name__ == "_match_unit":
                returned.extend(len(m.rows) for m in out)
            return out

    where = "key.k is not null"
    a = run_delete(Checkpoint.open(str(here)).storage, Guards(), operator=0, where=where)
    engine = Counting(tmp_path / "there")
    b = run_delete(
        Checkpoint.open(str(there)).storage, Guards(), operator=0, where=where, engine=engine
    )
    assert b.plan.body_json() | {"checkpoint": None} == a.plan.body_json() | {"checkpoint": None}
    matched = sum(p.matched for p in b.plan.partitions)
    assert returned and max(returned) <= SAMPLE_ROWS < matched


@pytest.fixture(scope="module")
def repartitioned(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """``spark4-hdfs-agg`` repartitioned by ckpt to 1 and to 400 partitions (most of them
    empty: the state has 7 keys)."""
    out = {}
    for n in (1, 400):
        root = tmp_path_factory.mktemp(f"partitions-{n}") / "ckpt"
        shutil.copytree(CASES_DIR / "spark4-hdfs-agg" / "checkpoint", root)
        age_everything(root)
        done = run_cli("repartition", str(root), "--partitions", str(n), "--apply", "--yes")
        assert done.exit_code == 0, done.stdout + done.stderr
        shutil.rmtree(root.parent / "ckpt.ckpt-quarantine")
        age_everything(root)
        out[n] = root
    return out


@pytest.mark.parametrize("n", [1, 400])
@pytest.mark.parametrize("workers", [1, 4])
@pytest.mark.parametrize("round_", ["_match_unit", "_write_unit"])
def test_1_to_400_partitions_in_order_with_slow_tasks(
    n: int, workers: int, round_: str, repartitioned: dict[int, Path], tmp_path: Path
) -> None:
    """Every even unit of a round slow: the plan and the state after are the local
    engine's, partition by partition in order."""
    here, there = tmp_path / "here", tmp_path / "there"
    for root in (here, there):
        shutil.copytree(repartitioned[n], root)
    where = "key.k in ('k0', 'k3', 'k5')"
    a = run_delete(Checkpoint.open(str(here)).storage, Guards(apply=True), operator=0, where=where)
    engine = Varying(workers, round_, set(), 0.001)
    storage = Checkpoint.open(str(there)).storage
    b = run_delete(storage, Guards(apply=True), operator=0, where=where, engine=engine)
    assert b.result is not None and b.result.validation.ok
    assert [p.partition for p in b.plan.partitions] == list(range(n))
    assert b.plan.body_json() | {"checkpoint": None} == a.plan.body_json() | {"checkpoint": None}
    assert b.result.removed == 3 and state(there) == state(here)


@pytest.mark.parametrize("engine_of", ["processes", "pickled", "slow threads"])
def test_a_failing_partition_gives_its_own_one_line_error(
    engine_of: str, repartitioned: dict[int, Path], tmp_path: Path
) -> None:
    """400 partitions, one of them with a damaged snapshot: the deletion stops with that
    partition's own error (one line naming its file), whatever the pool, and nothing in the
    checkpoint changed."""
    root = tmp_path / "ckpt"
    shutil.copytree(repartitioned[400], root)
    sizes = {p.parent.name: p.stat().st_size for p in root.glob("state/0/*/*.snapshot")}
    damaged = max(sizes, key=lambda p: (sizes[p], int(p)))  # a partition that has keys
    snapshot = next((root / "state" / "0" / damaged).glob("*.snapshot"))
    data = bytearray(snapshot.read_bytes())
    data[20:40] = b"\xff" * 20
    snapshot.write_bytes(bytes(data))
    original = tree(root)
    engine: LocalEngine
    if engine_of == "processes":
        engine = Varying(2, "", None, 0)
    elif engine_of == "pickled":
        engine = Tasks(root)
    else:
        engine = Varying(4, "_match_unit", set(), 0.001)
    with pytest.raises(CkptError) as raised:
        run_delete(
            Checkpoint.open(str(root)).storage,
            Guards(apply=True),
            operator=0,
            where="key.k is not null",
            engine=engine,
        )
    message = str(raised.value)
    assert message.startswith(f"state/0/{damaged}/{snapshot.name}") and "\n" not in message
    left = tree(root)
    left.pop(".ckpt-lock", None)
    assert left == original
    assert not list(tmp_path.glob("*.ckpt-quarantine/*/staging"))
