"""`repartition --apply` killed part way (no Spark needed): the checkpoint is then untouched,
repartitioned, or an unfinished repartition that `find_unfinished_repartition` names;
running it again with the same count finishes it (the state then
equals the state before), and `--undo` gives back every byte.

Two ways to kill it: death in the middle of its Nth write of a checkpoint file (half the bytes
written, then the process exits on the spot, like SIGKILL), for writes spread over the whole
run, so every step is reached whatever the machine's speed; and SIGKILL after a delay."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ckpt_cli.change.lock import LOCK_NAME
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.core.unfinished import find_unfinished_repartition
from ckpt_cli.storage import Storage
from ckpt_cli.validate import validate
from tests.conftest import run_cli
from tests.fixture_copies import age_everything
from tests.kill_support import die_in_nth_write, kill_after, tree
from tests.test_repartition import fixture, state_rows

# Checkpoint files a 2 -> 3 repartition writes: HDFS 12 (offsets, 3 snapshots, metadata,
# commit, each with its .crc); RocksDB format v2 about 24 (SSTs, zips, checksum files).
DEATHS = {"spark4-hdfs-agg": [1, 3, 6, 11, 12], "spark4-rocksdb-v2": [4, 16, 22]}


def prepared(name: str, tmp_path: Path) -> tuple[Path, dict[str, bytes], int]:
    source = tmp_path / "source"
    shutil.copytree(fixture(name), source)
    age_everything(source)
    last = Checkpoint.open(Storage.from_url(str(source))).batches.latest_committed
    assert last is not None
    return source, tree(source), last


def check_and_recover(
    path: Path, original: dict[str, bytes], last: int, finish: bool, rows: object
) -> str:
    """What the kill left, then finish or undo it; returns the outcome."""
    ckpt = Checkpoint.open(Storage.from_url(str(path)))
    unfinished = find_unfinished_repartition(ckpt)
    report = validate(ckpt)
    if unfinished is not None:
        outcome = "unfinished"
        assert (unfinished.batch, unfinished.to_partitions) == (last + 1, 3)
    elif ckpt.batches.latest_committed == last + 1:
        outcome = "done"
        assert report.ok, [f.message for f in report.findings]
    else:
        outcome = "untouched"
        leftovers = set(tree(path)) - set(original) - {LOCK_NAME}
        assert all(Path(p).name.endswith(".tmp") for p in leftovers), leftovers
        assert {k: v for k, v in tree(path).items() if k in original} == original
    if finish:
        args = ("--partitions", "3", "--apply", "-y", "--force", "--break-lock")
        again = run_cli("repartition", str(path), *args)
        if outcome == "done":
            assert again.exit_code == 2 and "already has 3 partitions" in again.stderr
        else:
            assert again.exit_code == 0, again.stderr
        assert validate(Checkpoint.open(Storage.from_url(str(path)))).ok
        assert state_rows(path, last + 1) == rows
    else:
        undone = run_cli("repartition", str(path), "--undo", "--break-lock")
        if undone.exit_code == 2:  # died before its manifest: nothing to undo
            assert "no repartition to undo" in undone.stderr and outcome == "untouched"
            (path / LOCK_NAME).unlink(missing_ok=True)
            for p in set(tree(path)) - set(original):
                (path / p).unlink()
        else:
            assert undone.exit_code == 0, undone.stderr
        assert tree(path) == original
    return outcome


@pytest.mark.parametrize("name", sorted(DEATHS))
def test_a_repartition_dying_in_any_write_is_finished_or_undone(name: str, tmp_path: Path) -> None:
    source, original, last = prepared(name, tmp_path)
    rows = state_rows(source, last)
    outcomes = []
    for i, nth in enumerate(DEATHS[name]):
        path = tmp_path / f"run{nth}" / "ckpt"
        shutil.copytree(source, path)
        args = ["repartition", str(path), "--partitions", "3", "--apply", "-y", "--force"]
        died = die_in_nth_write(nth, f"{path}/", args)
        assert died.returncode == 9, died.stderr.decode()  # it did die in that write
        outcomes.append(check_and_recover(path, original, last, i % 2 == 0, rows))
    assert outcomes[-1] != "untouched" and "unfinished" in outcomes


def test_a_repartition_killed_with_sigkill_is_finished_or_undone(tmp_path: Path) -> None:
    source, original, last = prepared("spark4-hdfs-agg", tmp_path)
    rows = state_rows(source, last)
    for i, delay in enumerate([0.3]):
        path = tmp_path / f"run{i}" / "ckpt"
        shutil.copytree(source, path)
        kill_after(
            ["repartition", str(path), "--partitions", "3", "--apply", "-y", "--force"], path, delay
        )
        check_and_recover(path, original, last, i % 2 == 1, rows)
