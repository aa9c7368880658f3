"""`repair --apply` killed part way (no Spark needed): whatever the kill left, `repair --undo`
on its manifest puts the damaged checkpoint back byte for byte.

Two ways to kill it: SIGKILL at a sweep of delays after it takes the lock, and death in the
middle of writing its manifest (the process exits half way through the write), once for each
manifest write of the run. The manifest is replaced whole, so the second never leaves an
unreadable one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ckpt_cli.change.lock import LOCK_NAME
from tests.conftest import CASES, run_cli
from tests.fixture_copies import truncate_latest_delta
from tests.kill_support import die_in_nth_write, kill_after, tree

CASE = next(c for c in CASES if c.name == "spark4-hdfs-agg")


def damaged_copy(tmp_path: Path) -> Path:
    broken = tmp_path / "work" / "broken"
    shutil.copytree(CASE.checkpoint, broken)
    truncate_latest_delta(broken)  # repair plans a rollback: moves and a rewrite
    return broken


def undo_all(tmp_path: Path, broken: Path) -> None:
    for manifest in sorted(tmp_path.glob("work/*.ckpt-quarantine/*/manifest.json")):
        undone = run_cli(
            "repair", str(broken), "--undo", "--manifest", str(manifest), "--break-lock"
        )
        assert undone.exit_code == 0, undone.stderr
    (broken / LOCK_NAME).unlink(missing_ok=True)


@pytest.mark.parametrize("nth", [1, 2, 3, 4])
def test_a_repair_dying_while_it_writes_its_manifest_is_undone(nth: int, tmp_path: Path) -> None:
    broken = damaged_copy(tmp_path)
    damaged = tree(broken)
    args = ["repair", str(broken), "--apply", "--yes", "--force"]
    died = die_in_nth_write(nth, "manifest.json", args)
    assert died.returncode == 9, died.stderr.decode()  # it did die in that write
    undo_all(tmp_path, broken)
    assert tree(broken) == damaged


@pytest.mark.parametrize("delay_ms", [0, 3, 10, 40])
def test_a_repair_killed_at_any_moment_is_undone(delay_ms: int, tmp_path: Path) -> None:
    broken = damaged_copy(tmp_path)
    damaged = tree(broken)
    kill_after(["repair", str(broken), "--apply", "--yes", "--force"], broken, delay_ms / 1000)
    undo_all(tmp_path, broken)
    assert tree(broken) == damaged
