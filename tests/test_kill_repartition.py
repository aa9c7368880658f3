"""`repartition --apply` killed with SIGKILL at points spread over its run (no Spark needed):
the checkpoint is then untouched, repartitioned, or an unfinished repartition that validate
or `find_unfinished_repartition` names; running it again with the same count finishes it
(the state then equals the state before), and `--undo` gives back every byte."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ckpt_cli.lock import LOCK_NAME
from ckpt_cli.model import Checkpoint
from ckpt_cli.repartition.unfinished import find_unfinished_repartition
from ckpt_cli.storage import Storage
from ckpt_cli.validate import validate
from tests.conftest import run_cli
from tests.fixture_copies import age_everything
from tests.kill_support import kill_after, tree
from tests.test_repartition import fixture, state_rows

# Seconds after the lock is taken: spread over a run of each (RocksDB builds a DB per
# partition, so its run is longer).
DELAYS = {
    "spark4-hdfs-agg": [0.0, 0.15, 0.3, 0.45, 0.6],
    "spark4-rocksdb-v2": [0.3, 0.6, 0.9],
}


def without_lock(files: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in files.items() if k != LOCK_NAME}


@pytest.mark.parametrize("name", sorted(DELAYS))
def test_a_killed_repartition_is_finished_or_undone(name: str, tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(fixture(name), source)
    age_everything(source)
    original = tree(source)
    last = Checkpoint.open(Storage.from_url(str(source))).batches.latest_committed
    assert last is not None
    rows = state_rows(source, last)
    outcomes = set()
    for i, delay in enumerate(DELAYS[name]):
        path = tmp_path / f"run{i}" / "ckpt"
        shutil.copytree(source, path)
        kill_after(["repartition", str(path), "-p", "3", "--apply", "-y", "--force"], path, delay)

        ckpt = Checkpoint.open(Storage.from_url(str(path)))
        unfinished = find_unfinished_repartition(ckpt)
        report = validate(ckpt)
        committed = ckpt.batches.latest_committed
        if unfinished is not None:
            outcomes.add("unfinished")
            assert (unfinished.batch, unfinished.to_partitions) == (last + 1, 3)
        elif committed == last + 1:
            outcomes.add("done")
            assert report.ok, [f.message for f in report.findings]
        else:
            outcomes.add("untouched")
            assert without_lock(tree(path)) == without_lock(original)

        if i % 2 == 0:
            again = run_cli(
                "repartition", str(path), "-p", "3", "--apply", "-y", "--force", "--break-lock"
            )
            if committed == last + 1 and unfinished is None:
                assert again.exit_code == 2 and "already has 3 partitions" in again.stderr
            else:
                assert again.exit_code == 0, again.stderr
            assert validate(Checkpoint.open(Storage.from_url(str(path)))).ok
            assert state_rows(path, last + 1) == rows
        else:
            undone = run_cli("repartition", str(path), "--undo", "--break-lock")
            if undone.exit_code == 2:  # killed before its manifest: nothing was changed
                assert "no repartition to undo" in undone.stderr
                (path / LOCK_NAME).unlink(missing_ok=True)
            else:
                assert undone.exit_code == 0, undone.stderr
            assert tree(path) == original
    assert len(outcomes) >= 2, outcomes  # the delays reach inside the run
