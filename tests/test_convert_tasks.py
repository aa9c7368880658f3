"""``ckpt convert`` on a distributed engine, with the tasks run here on pickled copies of what
Spark would ship (``Tasks``): the same state as the conversion on one machine, every file
built in the staging beside the checkpoint (never in it), the staging gone after, the
checkpoint valid, and ``--undo`` back to every byte. A task that fails stops the conversion
before anything changed in the checkpoint. (``test_convert_engine_spark.py`` runs the same
on Spark.)"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.change.flow import Guards
from ckpt_cli.convert.run import run_convert, undo_convert
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.engine import LocalEngine
from tests.conftest import CASES_DIR
from tests.fixture_copies import latest
from tests.kill_support import tree
from tests.test_convert import _kwargs, copy, records_at
from tests.test_repartition_tasks import UUID, Tasks, files_under

pytestmark = pytest.mark.skipif(not CASES_DIR.is_dir(), reason="no fixtures")

CHANGES = [
    ("spark4-hdfs-agg", ["--provider", "rocksdb"]),
    ("spark4-rocksdb-changelog", ["--provider", "hdfs"]),
    ("spark4-rocksdb-changelog", ["--format-version", "2"]),
    ("spark4-rocksdb-v2", ["--format-version", "1"]),
    ("spark4-session-hdfs", ["--provider", "rocksdb"]),
    ("spark4-join", ["--provider", "rocksdb"]),
]


@pytest.mark.parametrize(("name", "change"), CHANGES)
def test_tasks_convert_what_one_machine_converts(
    name: str, change: list[str], tmp_path: Path
) -> None:
    here = copy(name, tmp_path / "here" / "ckpt")
    there = copy(name, tmp_path / "there" / "ckpt")
    original = tree(there)
    last = latest(here)
    engine = Tasks(tmp_path / "there")
    a = run_convert(Checkpoint.open(str(here)).storage, Guards(apply=True), **_kwargs(change))
    b = run_convert(
        Checkpoint.open(str(there)).storage, Guards(apply=True), engine=engine, **_kwargs(change)
    )
    assert a.result is not None and b.result is not None
    assert b.result.validation.ok, b.result.validation
    assert [s.to_json() for s in a.plan.stores] == [s.to_json() for s in b.plan.stores]
    assert records_at(there, last + 1) == records_at(here, last + 1)
    # Both rounds of tasks ran (counting, building), and the built files were staged
    # beside the checkpoint, never in it; the staging is gone.
    assert len(engine.seen) == 2
    staged = {p for p in engine.seen[1] if "/staging/" in p}
    assert staged and all(p.startswith("ckpt.ckpt-quarantine/") for p in staged)
    assert not [p for p in files_under(tmp_path / "there") if "/staging/" in p]
    # The same files, their checksums included, but for the uuids in their names.
    assert masked(b.result.written) == masked(a.result.written)
    undo_convert(Checkpoint.open(str(there)).storage)
    assert tree(there) == original


def masked(written: dict[str, int]) -> list[str]:
    return sorted(UUID.sub("<uuid>", re.sub(r"/\d{6}-", "/<n>-", p)) for p in written)


class Failing(LocalEngine):
    """A distributed engine whose building tasks fail part way."""

    name = "failing"

    def map(self, fn: Any, units: Any, **kw: Any) -> Any:
        if fn.__name__ == "_build_unit":
            raise RuntimeError("a task failed")
        return super().map(fn, units, **kw)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failed_task_leaves_the_checkpoint_as_it_was(workers: int, tmp_path: Path) -> None:
    root = copy("spark4-hdfs-agg", tmp_path / "ckpt")
    original = tree(root)
    engine = Failing(workers)
    with pytest.raises(RuntimeError, match="a task failed"):
        run_convert(
            Checkpoint.open(str(root)).storage,
            Guards(apply=True),
            provider="rocksdb",
            engine=engine,
        )
    left = tree(root)
    left.pop(".ckpt-lock", None)
    assert left == original
    assert not list(tmp_path.glob("*.ckpt-quarantine/*/staging"))
    shutil.rmtree(tmp_path / "ckpt.ckpt-quarantine")
