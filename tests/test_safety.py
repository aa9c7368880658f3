"""Safety of the commands that change a checkpoint (``cleanup --apply``, ``repair --apply``):
nothing outside the checkpoint is touched (symbolic links), the library refuses an active query
and young files, ``--min-age`` is checked like Delta's VACUUM retention, and one command at a
time holds the checkpoint lock. All on copies of the real fixtures."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ckpt_cli.change.flow import Guards
from ckpt_cli.change.lock import LOCK_NAME, acquire, checkpoint_lock, read_lock, release
from ckpt_cli.cleanup import apply_cleanup, plan_cleanup, run_cleanup
from ckpt_cli.cli.common import parse_duration
from ckpt_cli.core.activity import query_activity
from ckpt_cli.core.model import Checkpoint, FileKind
from ckpt_cli.errors import LockHeldError, OutsideCheckpointError, SafetyCheckError, UsageError
from ckpt_cli.repair import apply_repair, plan_repair, run_repair
from ckpt_cli.storage import Storage
from tests.conftest import CASES, CASES_DIR, REPO, run_cli
from tests.fixture_copies import (
    age_everything,
    plan_latest_batch,
    touch_everything,
    truncate_latest_delta,
)
from tests.kill_support import kill_after
from tests.servers import AzureServer, S3Server

pytestmark = pytest.mark.skipif(not CASES, reason="no fixtures")

HDFS = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"
ROCKS = CASES_DIR / "spark4-rocksdb-agg" / "checkpoint"


def copy(src: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "ckpt"
    shutil.copytree(src, dest)
    return dest


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Bytes and mtime (ns) of every file under ``root``."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def latest(root: Path) -> int:
    return max(int(p.name) for p in (root / "commits").iterdir() if p.name.isdigit())


def link_out(root: Path, tmp_path: Path) -> tuple[Path, dict[str, tuple[bytes, int]]]:
    """Move partition 0's ``SSTs`` directory and partition 1's oldest zip out of the checkpoint
    and leave symbolic links to them in their place; everything aged so that cleanup
    --retain 1 would delete old SSTs there and the zip."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "state/0/0/SSTs").rename(outside / "SSTs")
    (root / "state/0/0/SSTs").symlink_to(outside / "SSTs", target_is_directory=True)
    oldest = min((root / "state/0/1").glob("*.zip"), key=lambda p: int(p.name.split(".")[0]))
    oldest.rename(outside / oldest.name)
    oldest.symlink_to(outside / oldest.name)
    age_everything(root)
    age_everything(outside)
    return outside, snapshot(outside)


# -- symbolic links: nothing outside the checkpoint is touched ----------------------------------


def test_cleanup_never_deletes_through_symlinks(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    outside, before = link_out(root, tmp_path)
    # Without the links, partition 1's old SSTs and the old zip would be deleted.
    result = run_cli("cleanup", str(root), "--retain", "1", "--apply", "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert report["result"]["deleted"] > 0
    skipped = {s["path"] for s in report["skipped"]}
    assert {"state/0/0/SSTs", "state/0/1/8.zip"} <= skipped
    assert not any(d["path"].startswith("state/0/0/SSTs/") for d in report["deletions"])
    assert snapshot(outside) == before
    assert (root / "state/0/0/SSTs").is_symlink() and (root / "state/0/1/8.zip").is_symlink()


def test_repair_refuses_a_checkpoint_with_symlinks(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    temp = root / "state/0/1/.12.zip.8d0e8a86-98c5-4f0e-9a6b-0b1f3a3c5d11.tmp"
    temp.write_bytes(b"PK")
    outside, before = link_out(root, tmp_path)
    result = run_cli("repair", str(root), "--apply", "--yes", "--force")
    assert result.exit_code == 2
    assert "state/0/0/SSTs is a symbolic link" in result.stderr.replace("\n", " ")
    assert snapshot(outside) == before and temp.exists()


def test_storage_refuses_paths_that_resolve_outside(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    outside, before = link_out(root, tmp_path)
    storage = Storage.from_url(str(root))
    sst = next((outside / "SSTs").iterdir()).name
    through_dir = f"state/0/0/SSTs/{sst}"
    with pytest.raises(OutsideCheckpointError, match="outside"):
        storage.delete_many(["state/0/0/9.zip", through_dir])
    with pytest.raises(OutsideCheckpointError):
        storage.delete_many(["state/0/1/8.zip"])  # a linked file: its target is outside
    with pytest.raises(OutsideCheckpointError):
        storage.write_bytes(f"{through_dir}.new", b"x")
    quarantine = str(tmp_path / "q")
    with pytest.raises(OutsideCheckpointError):
        storage.move_out(through_dir, f"{quarantine}/files/x", within=quarantine)
    with pytest.raises(OutsideCheckpointError):
        storage.move_out("state/0/0/9.zip", str(tmp_path / "elsewhere"), within=quarantine)
    with pytest.raises(OutsideCheckpointError):
        storage.contained("../outside/SSTs")
    assert snapshot(outside) == before
    assert (root / "state/0/0/9.zip").exists()  # checked before anything was deleted
    listing = storage.list_all()
    assert set(listing.symlinks) == {"state/0/0/SSTs", "state/0/1/8.zip"}
    assert not any(e.path.startswith("state/0/0/SSTs/") for e in listing)


# -- the library's guards: active query, young files, --min-age ---------------------------------


def test_apply_cleanup_refuses_an_active_query(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    age_everything(root)
    plan_latest_batch(root, 40)  # planned and written 40 s ago: the query is running
    ckpt = Checkpoint.open(str(root))
    plan = plan_cleanup(ckpt, retain=1)
    assert plan.deletions
    both = r"batch \(9\) was planned 4\ds ago and offsets/ was last written 4\ds ago, both under"
    with pytest.raises(SafetyCheckError, match=f"looks active .*{both}"):
        apply_cleanup(ckpt, plan)
    assert all((root / d.path).exists() for d in plan.deletions)
    assert apply_cleanup(ckpt, plan, force=True).deleted == len(plan.deletions)


def test_apply_cleanup_refuses_young_files_and_low_min_age(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    age_everything(root)
    temp = root / "state/0/0/.11.zip.8d0e8a86-98c5-4f0e-9a6b-0b1f3a3c5d11.tmp"
    temp.write_bytes(b"PK")  # a write in progress
    ckpt = Checkpoint.open(str(root))
    # A plan made as if it were two hours later: it names the young temp file.
    later = plan_cleanup(ckpt, retain=1, now=time.time() + 7200)
    assert any(d.path == str(temp.relative_to(root)) for d in later.deletions)
    with pytest.raises(SafetyCheckError, match=r"\.tmp: modified \d+ s ago"):
        apply_cleanup(ckpt, later)
    low = plan_cleanup(ckpt, retain=1, min_age=0)
    with pytest.raises(SafetyCheckError, match="below the default 1h"):
        apply_cleanup(ckpt, low)
    assert temp.exists() and all((root / d.path).exists() for d in low.deletions)


def test_apply_repair_has_the_same_guards(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    n = latest(root)
    delta = root / f"state/0/1/{n + 1}.delta"
    delta.write_bytes(delta.read_bytes()[:-8])  # truncated just now: a rollback is planned
    plan_latest_batch(root)  # planned just now: the query looks active
    ckpt = Checkpoint.open(str(root))
    plan = plan_repair(ckpt)
    assert plan.rollback_to is not None
    with pytest.raises(SafetyCheckError, match="looks active"):
        apply_repair(ckpt, plan)
    age_everything(root)
    temp = root / "state/0/0/.12.delta.0b3b0a9e-2f5e-4a43-9c7e-3d3b3c1f0a11.tmp"
    temp.write_bytes(b"LZ4Block")  # written seconds ago
    ckpt = Checkpoint.open(str(root))
    plan = plan_repair(ckpt)
    with pytest.raises(SafetyCheckError, match=r"\.tmp: modified"):
        apply_repair(ckpt, plan)
    with pytest.raises(SafetyCheckError, match="below the default"):
        apply_repair(ckpt, plan, min_age=60)
    assert temp.exists() and (root / f"commits/{n}").exists()
    result = apply_repair(ckpt, plan, force=True, quarantine=str(tmp_path / "q"))
    assert result.validation.to_json()["ok"] and not temp.exists()


def test_cli_repair_refuses_young_temp_files(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    age_everything(root)
    temp = root / "state/0/0/.12.delta.0b3b0a9e-2f5e-4a43-9c7e-3d3b3c1f0a11.tmp"
    temp.write_bytes(b"LZ4Block")
    result = run_cli("repair", str(root), "--apply", "--yes")
    assert result.exit_code == 2 and "modified" in result.stderr and temp.exists()


# -- the active-query check: when the last batch was planned, when offsets/ was written --------


def one_line(text: str) -> str:
    return " ".join(text.split())


def test_a_copy_is_not_an_active_query(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    touch_everything(root)  # cp -r, a restore, a download: new files, batches days old
    activity = query_activity(Checkpoint.open(str(root)))
    assert not activity.active and activity.signals == ["written"]
    assert activity.planned_age is not None and activity.planned_age > 86400
    assert activity.written_age is not None and 0 <= activity.written_age < 60
    assert activity.note is not None and "(a copy or restore?)" in activity.note
    before = snapshot(root)
    result = run_cli("cleanup", str(root), "--retain", "1", "--apply", "--yes", "--json")
    assert result.exit_code == 0, result.stderr
    doc = result.json()
    assert doc["query_active"] is False and doc["activity"]["signals"] == ["written"]
    assert any("a copy or restore?" in w for w in doc["warnings"])
    # Every file is new: none is deleted (their times cannot tell a write in progress).
    assert doc["result"]["deleted"] == 0 and doc["kept_too_young"]
    assert snapshot(root) == before
    text = run_cli("cleanup", str(root), "--retain", "1")
    assert text.exit_code == 0 and "looks active" not in text.stderr
    assert "warning: offsets/ was last written " in text.stderr
    assert "but the last batch (9) was planned " in text.stderr
    moved = run_cli("repartition", str(root), "--partitions", "3", "--apply", "-y")
    assert moved.exit_code == 0, moved.stderr


def test_repairing_a_copy_is_refused_for_its_young_files_only(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    truncate_latest_delta(root)  # a rollback to plan
    touch_everything(root)
    result = run_cli("repair", str(root), "--apply", "--yes")
    assert result.exit_code == 2 and "looks active" not in result.stderr
    err = one_line(result.stderr)
    assert ": modified 0 s ago, under --min-age 1h" in err
    assert "(a copy or restore?)" in err and "every file of a copy is new" in err
    forced = run_cli("repair", str(root), "--apply", "--yes", "--force")
    assert forced.exit_code == 0, forced.stderr


def test_planned_and_written_just_now_is_refused_naming_both(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    age_everything(root)
    temp = root / "state/0/0/.12.delta.0b3b0a9e-2f5e-4a43-9c7e-3d3b3c1f0a11.tmp"
    temp.write_bytes(b"LZ4Block")  # something for repair to do
    age_everything(root)
    plan_latest_batch(root, 30)
    before = snapshot(root)
    both = (
        r"the query looks active \(the last batch \(9\) was planned 3\ds ago and offsets/ was "
        r"last written 3\ds ago, both under --min-age 1h\)"
    )
    for command, *args in (
        ("cleanup", "--retain", "1"),
        ("repair",),
        ("repartition", "--partitions", "3"),
    ):
        refused = run_cli(command, str(root), *args, "--apply", "--yes")
        assert refused.exit_code == 2, (command, refused.stdout)
        assert re.search(both, one_line(refused.stderr)), refused.stderr
        # The dry run plans, and says what --apply would refuse.
        dry = run_cli(command, str(root), *args)
        assert dry.exit_code in (0, 1), (command, dry.stderr)
        assert re.search(both + ": applying refuses unless --force", one_line(dry.stderr))
    assert snapshot(root) == before


def test_a_batch_time_ahead_of_this_clock_counts_as_young(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    age_everything(root)
    plan_latest_batch(root, -30)  # Spark's machine 30 s ahead of this one
    activity = query_activity(Checkpoint.open(str(root)))
    assert activity.active and activity.signals == ["planned", "written"]
    assert activity.planned_age is not None and -31 < activity.planned_age < -25
    assert re.search(r"was planned (2\d|30)s in the future", activity.evidence())


def test_without_a_batch_time_the_file_time_decides(tmp_path: Path) -> None:
    # Continuous processing writes offsets entries without batch metadata (an empty line).
    root = copy(HDFS, tmp_path)
    entry = root / "offsets/9"
    header, _, sources = entry.read_text().split("\n", 2)
    entry.write_text(f"{header}\n\n{sources}")
    (root / "offsets/.9.crc").unlink()
    age_everything(root)
    assert not query_activity(Checkpoint.open(str(root))).active
    os.utime(entry)
    activity = query_activity(Checkpoint.open(str(root)))
    assert activity.active and activity.planned_ms is None and activity.signals == ["written"]
    assert "batch 9's batchTimestampMs cannot be read" in activity.evidence()


def test_an_unfinished_repartition_is_judged_by_its_file_time(tmp_path: Path) -> None:
    # A repartition writes offsets/N+1 with batch N's batchTimestampMs and commits it last:
    # until then its writer may be running, whatever that time says.
    root = copy(HDFS, tmp_path)
    age_everything(root)
    assert run_cli("repartition", str(root), "--partitions", "3", "--apply", "-y").exit_code == 0
    for name in ("commits/10", "commits/.10.crc"):
        (root / name).unlink()
    activity = query_activity(Checkpoint.open(str(root)))
    assert activity.active and activity.copied_from == 9 and activity.signals == ["written"]
    assert "repeats batch 9's batchTimestampMs (a repartition" in activity.evidence()
    refused = run_cli("repartition", str(root), "--partitions", "3", "--apply", "-y")
    assert refused.exit_code == 2 and "looks active" in refused.stderr
    age_everything(root)  # the repartition was left two hours ago
    assert not query_activity(Checkpoint.open(str(root))).active
    assert run_cli("repartition", str(root), "--partitions", "3", "--apply", "-y").exit_code == 0


def test_library_dry_runs_never_refuse(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    age_everything(root)
    truncate_latest_delta(root)
    plan_latest_batch(root)
    storage = Storage.from_url(str(root))
    before = snapshot(root)
    plan = plan_cleanup(Checkpoint.open(str(root)), retain=1, min_age=60, force=False)
    warnings = [
        run_cleanup(storage, Guards(min_age=60), retain=1).plan.warnings,
        run_repair(storage, Guards(min_age=60)).plan.warnings,
        plan.warnings,
    ]
    for low, active in warnings:
        assert "is below the default 1h: applying needs force=True" in low
        assert active.startswith("the query looks active (the last batch (9) was planned ")
        assert active.endswith(": applying refuses unless force=True")
    assert snapshot(root) == before
    with pytest.raises(SafetyCheckError, match="below the default"):
        run_cleanup(storage, Guards(apply=True, min_age=0), retain=1)
    with pytest.raises(SafetyCheckError, match="looks active"):
        run_repair(storage, Guards(apply=True))
    assert snapshot(root) == before


def test_repartition_dry_run_warns_of_a_low_min_age(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    age_everything(root)
    dry = run_cli("repartition", str(root), "--partitions", "3", "--min-age", "0", "--json")
    assert dry.exit_code == 0, dry.stderr
    assert dry.json()["warnings"] == [
        "min_age=0s is below the default 1h: applying needs force=True"
    ]
    text = run_cli("repartition", str(root), "--partitions", "3", "--min-age", "0")
    assert text.exit_code == 0
    assert "warning: --min-age 0s is below the default 1h: applying needs --force" in text.stderr
    refused = run_cli(
        "repartition", str(root), "--partitions", "3", "--min-age", "0", "--apply", "-y"
    )
    assert refused.exit_code == 2 and "below the default 1h" in refused.stderr


# -- --min-age ----------------------------------------------------------------------------------


def test_parse_duration_forms() -> None:
    assert [parse_duration(t) for t in ("30s", "15m", "12h", "3d", "1w", "90", "1.5h")] == [
        30,
        900,
        43200,
        259200,
        604800,
        90,
        5400,
    ]
    for bad in ("yesterday", "5x", "-5m", "", "1h30m", "nan", "1e9"):
        with pytest.raises(UsageError):
            parse_duration(bad)


@pytest.mark.parametrize("command", ["orphans", "cleanup", "repair"])
@pytest.mark.parametrize("value", ["yesterday", "5x"])
def test_bad_min_age_is_one_line_usage_error(command: str, value: str) -> None:
    result = run_cli(command, str(HDFS), "--min-age", value)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"error: --min-age {value!r}: expected a duration like 30s, 15m, 12h, 3d, "
        "1w or plain seconds"
    ]


def test_min_age_below_default_needs_force(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    age_everything(root)
    before = snapshot(root)
    for min_age in ("0s", "30m"):
        result = run_cli(
            "cleanup", str(root), "--retain", "1", "--min-age", min_age, "--apply", "-y"
        )
        assert result.exit_code == 2, min_age
        assert "below the default 1h" in result.stderr and "still writing" in result.stderr
    result = run_cli("repair", str(root), "--min-age", "10m", "--apply", "--yes")
    assert result.exit_code == 2 and "below the default 1h" in result.stderr
    # A dry run plans, and warns of what --apply would refuse.
    for min_age in ("0", "30m"):
        dry = run_cli("cleanup", str(root), "--retain", "1", "--min-age", min_age)
        assert dry.exit_code == 0 and "OLD_VERSION" in dry.stdout, dry.stderr
        warning = f"warning: --min-age {min_age.rstrip('s')}"
        assert (
            warning in dry.stderr and "below the default 1h: applying needs --force" in dry.stderr
        )
    plan = run_cli("cleanup", str(root), "--retain", "1", "--min-age", "0", "--json").json()
    assert plan["applied"] is False and plan["files"] > 0
    assert plan["warnings"] == ["min_age=0s is below the default 1h: applying needs force=True"]
    assert snapshot(root) == before
    # orphans only reports: any --min-age is fine there.
    assert run_cli("orphans", str(root), "--retain", "1", "--min-age", "0").exit_code == 1
    forced = run_cli(
        "cleanup", str(root), "--retain", "1", "--min-age", "0s", "--force", "--apply", "--yes"
    )
    assert forced.exit_code == 0, forced.stderr


# -- the lock -----------------------------------------------------------------------------------


def test_second_cleanup_fails_naming_the_holder(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    age_everything(root)
    before = snapshot(root)
    with checkpoint_lock(Storage.from_url(str(root)), "ckpt cleanup"):
        assert (root / LOCK_NAME).exists()
        for extra in ([], ["--break-lock"]):  # a live holder's lock is never broken
            result = run_cli("cleanup", str(root), "--retain", "1", "--apply", "--yes", *extra)
            assert result.exit_code == 2
            line = result.stderr.splitlines()[0]
            assert f"locked by 'ckpt cleanup' (pid {os.getpid()} on {socket.gethostname()})" in line
            assert "taken " in line and " ago" in line
        result = run_cli("repair", str(root), "--apply", "--yes")
        assert result.exit_code == 2 and "locked by" in result.stderr
        # Dry runs and read-only commands do not take it, and do not mind it.
        assert run_cli("cleanup", str(root), "--retain", "1").exit_code == 0
        assert run_cli("validate", str(root), "--fail-on", "warning").exit_code == 0
        ckpt = Checkpoint.open(str(root))
        assert [f.kind for f in ckpt.files if f.path == LOCK_NAME] == [FileKind.CKPT_LOCK]
    assert not (root / LOCK_NAME).exists()  # released
    assert snapshot(root) == before


def test_concurrent_acquires_one_wins(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    barrier = threading.Barrier(8)
    won: list[str] = []
    lost: list[str] = []

    def race() -> None:
        storage = Storage.from_url(str(root))
        barrier.wait()
        try:
            won.append(acquire(storage, "ckpt cleanup"))
        except LockHeldError as exc:
            lost.append(exc.message)

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(lost) == 7
    release(Storage.from_url(str(root)), won[0])
    assert not (root / LOCK_NAME).exists()


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def write_lock(root: Path, *, host: str, pid: int, age: float) -> None:
    started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() - age))
    holder = {"host": host, "pid": pid, "command": "ckpt cleanup"}
    body = {"holder": holder, "started": started, "token": "t"}
    (root / LOCK_NAME).write_text(json.dumps(body))


def test_stale_lock_rule(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    age_everything(root)
    args = ("cleanup", str(root), "--retain", "1", "--apply", "--yes")
    # A killed holder on this host: reported with its age, broken with --break-lock.
    write_lock(root, host=socket.gethostname(), pid=dead_pid(), age=300)
    result = run_cli(*args)
    assert result.exit_code == 2 and "taken 5 min ago" in result.stderr
    assert "process is gone" in result.stderr and "--break-lock" in result.stderr
    assert run_cli(*args, "--break-lock").exit_code == 0
    assert not (root / LOCK_NAME).exists()
    # Another host's lock: its process cannot be checked; broken only once older than 12 h.
    write_lock(root, host="elsewhere.example", pid=1, age=3600)
    result = run_cli(*args, "--break-lock")
    assert result.exit_code == 2 and "on elsewhere.example" in result.stderr
    write_lock(root, host="elsewhere.example", pid=1, age=13 * 3600)
    assert run_cli(*args, "--break-lock").exit_code == 0
    assert read_lock(Storage.from_url(str(root))) is None


def test_lock_is_a_conditional_create_on_object_stores(store: S3Server | AzureServer) -> None:
    prefix = f"lock-{random.randrange(10**9)}"
    url = store.upload(HDFS, "ckpt-safety", prefix)
    first = Storage.from_url(url, store.options)
    second = Storage.from_url(url, store.options)
    token = acquire(first, "ckpt cleanup")
    # The conditional create itself refuses a second lock object...
    with pytest.raises(FileExistsError):
        second.fs.pipe_file(second.contained(LOCK_NAME), b"{}", mode="create")
    # ...so a second command fails naming the holder.
    with pytest.raises(LockHeldError, match=f"pid {os.getpid()}"):
        acquire(second, "ckpt repair")
    held = read_lock(second)
    assert held is not None and held.command == "ckpt cleanup"
    release(first, token)
    assert read_lock(second) is None
    again = acquire(second, "ckpt repair")
    release(second, again)


# -- SIGKILL mid-cleanup ------------------------------------------------------------------------


def test_killed_cleanup_leaves_a_restartable_checkpoint_and_a_breakable_lock(
    tmp_path: Path,
) -> None:
    rng = random.Random(14)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_bytes(b"not the checkpoint's")
    before_outside = snapshot(outside)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for attempt in range(3):
        root = tmp_path / f"run{attempt}" / "ckpt"
        root.parent.mkdir()
        shutil.copytree(ROCKS, root)
        (root / "state/0/0/outside").symlink_to(outside, target_is_directory=True)
        age_everything(root)
        args = [sys.executable, "-m", "ckpt_cli", "cleanup", str(root), "--retain", "1"]
        # Killed somewhere in the locked section.
        pid = kill_after([*args[3:], "--apply", "--yes"], root, rng.uniform(0, 0.03))
        # Whatever was deleted, the checkpoint still restarts from its latest batch.
        check = run_cli("validate", str(root), "--json")
        assert check.json()["ok"], check.json()["findings"]
        if (root / LOCK_NAME).exists():
            again = subprocess.run([*args, "--apply", "--yes"], env=env, capture_output=True)
            assert again.returncode == 2
            err = again.stderr.decode()
            assert f"pid {pid}" in err and "process is gone" in err and " ago" in err
        done = subprocess.run(
            [*args, "--apply", "--yes", "--break-lock"], env=env, capture_output=True
        )
        assert done.returncode == 0, done.stderr
        assert not (root / LOCK_NAME).exists()
        check = run_cli("validate", str(root), "--all-versions", "--json")
        assert check.json()["ok"], check.json()["findings"]
        assert snapshot(outside) == before_outside
