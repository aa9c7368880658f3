"""Carrying a repair plan out: write-ahead manifest, quarantine instead of deletion, and a
validation at the end."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from ckpt_cli.change.flow import Guards, run_change
from ckpt_cli.change.lock import checkpoint_lock
from ckpt_cli.change.manifest import Manifest, fresh_quarantine
from ckpt_cli.change.safety import check_old_enough, check_stopped
from ckpt_cli.core.activity import DEFAULT_MIN_AGE_SECONDS
from ckpt_cli.core.model import Checkpoint, FileKind
from ckpt_cli.core.read import iter_state
from ckpt_cli.core.rebuild import codec_of, plan_version
from ckpt_cli.errors import CkptError
from ckpt_cli.formats.checksums import hadoop_crc_bytes
from ckpt_cli.formats.names import hadoop_crc_name
from ckpt_cli.formats.snapshot_write import encode_hdfs_snapshot
from ckpt_cli.formats.state_encoders import row_checksums
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.repair.plan import (
    QUARANTINE,
    REWRITE_CRC,
    WRITE_SNAPSHOT,
    Action,
    RepairPlan,
    plan_repair,
)
from ckpt_cli.results import PlanRun, fields_json
from ckpt_cli.storage import Storage
from ckpt_cli.validate import ValidationReport, validate


@dataclass(frozen=True)
class RepairResult:
    """What :func:`apply_repair` changed, and the validation that followed."""

    manifest: str
    moved: int
    rewritten: int
    written: int
    validation: ValidationReport

    def to_json(self) -> dict[str, Any]:
        return fields_json(
            self,
            "manifest moved rewritten written validation",
            validation=self.validation.body_json(),
        )


def default_quarantine(ckpt: Checkpoint, now: float) -> str:
    return fresh_quarantine(ckpt.storage, "", now)


def _spark_checksum_bytes(old: bytes, data: bytes) -> bytes:
    import google_crc32c

    obj = json.loads(old)
    value = google_crc32c.value(data)
    obj["value"] = value - (1 << 32) if value >= 1 << 31 else value
    obj["mainFileSize"] = len(data)
    return json.dumps(obj, separators=(",", ":")).encode()


def _snapshot_bytes(ckpt: Checkpoint, action: Action) -> bytes:
    d = action.details
    plan = plan_version(ckpt, d["operator"], d["partition"], d["version"], store=d["store"])
    # iter_state gives HDFS values without their row checksums; the snapshot needs them.
    checksummed = row_checksums(ckpt.conf)
    return encode_hdfs_snapshot(iter_state(ckpt, plan), codec_of(ckpt), row_checksums=checksummed)


def apply_repair(
    ckpt: Checkpoint,
    plan: RepairPlan,
    *,
    quarantine: str | None = None,
    force: bool = False,
    min_age: float = DEFAULT_MIN_AGE_SECONDS,
    now: float | None = None,
    break_lock: bool = False,
    progress: ProgressSink = NULL_PROGRESS,
) -> RepairResult:
    """Carry ``plan`` out under the checkpoint lock, with cleanup's safety checks: a
    ``min_age`` below the default, an active query and files younger than ``min_age`` are
    refused unless ``force``; nothing resolving outside the checkpoint or the quarantine is
    moved or written."""
    if plan.refused:
        raise CkptError(f"{ckpt.storage.url}: not repairing: {plan.refused[0]}")
    storage = ckpt.storage
    now = time.time() if now is None else now
    check_stopped(ckpt, min_age=min_age, now=now, force=force)
    touched = [a.path for a in plan.actions if a.kind in (QUARANTINE, REWRITE_CRC)]
    check_old_enough(ckpt, touched, min_age=min_age, now=now, force=force)
    for action in plan.actions:
        storage.contained(action.path)  # all checked before the first change
    with checkpoint_lock(storage, "ckpt repair", break_lock=break_lock):
        return _apply_repair(ckpt, plan, quarantine, now, progress)


def _apply_repair(
    ckpt: Checkpoint,
    plan: RepairPlan,
    quarantine: str | None,
    now: float,
    progress: ProgressSink,
) -> RepairResult:
    storage = ckpt.storage
    where = (quarantine or default_quarantine(ckpt, now)).rstrip("/")
    manifest = Manifest(storage, where, now, lambda: {"plan": plan.body_json()})
    # Write-ahead: each change is in the manifest (not yet "done") before it is made, and
    # marked done after, so a repair killed at any point can be undone (undo_repair).
    manifest.save()
    moved = rewritten = written = 0
    progress.start("Repairing", total=len(plan.actions))
    intend = manifest.intend

    try:
        for action in plan.actions:
            if action.kind == QUARANTINE:
                manifest.move_out(action.path)  # recorded and marked done
                pending = []
                moved += 1
            elif action.kind == REWRITE_CRC:
                main = action.details["covers"]
                data = storage.read_bytes(main)
                old = storage.read_bytes(action.path)
                kind = next(
                    (s.kind for s in ckpt.sidecars_of(main) if s.path == action.path),
                    FileKind.HADOOP_CRC,
                )
                new = (
                    hadoop_crc_bytes(data)
                    if kind is FileKind.HADOOP_CRC
                    else _spark_checksum_bytes(old, data)
                )
                pending = manifest.save_original(action.path)
                storage.write_bytes(action.path, new)
                rewritten += 1
            elif action.kind == WRITE_SNAPSHOT:
                data = _snapshot_bytes(ckpt, action)
                crc = hadoop_crc_name(action.path)
                pending = intend(
                    {"change": "created", "path": action.path},
                    *([{"change": "created", "path": crc}] if storage.is_local else []),
                )
                storage.write_bytes(action.path, data, atomic=True)
                if storage.is_local:
                    storage.write_bytes(crc, hadoop_crc_bytes(data))
                written += 1
            else:
                pending = []
            manifest.done(pending)
            progress.advance()
    finally:
        progress.close()
        manifest.save(complete=True)
    after = validate(Checkpoint.open(storage))
    return RepairResult(manifest.path, moved, rewritten, written, after)


@dataclass(frozen=True)
class RepairRun(PlanRun[RepairPlan, RepairResult]):
    """``ckpt repair``: the plan, and what was changed when it was applied. Problems while
    repairs are left to apply, or when the checkpoint is still not healthy after them."""

    @property
    def ok(self) -> bool:
        if self.result is not None:
            return self.result.validation.ok
        return self.declined or self.plan.ok


def run_repair(
    storage: Storage,
    guards: Guards = Guards(),
    *,
    rollback_to: int | None = None,
    snapshot: bool = False,
    quarantine: str | None = None,
) -> RepairRun:
    """``ckpt repair`` as one call: validate and plan, and with ``guards.apply`` carry the
    plan out.
    Applying validates and plans under the checkpoint lock, so a second repair cannot act on a
    stale plan; the lock is released before this returns. A dry run never refuses for safety:
    the plan's ``warnings`` say what applying would refuse."""

    def plan(ckpt: Checkpoint) -> RepairPlan:
        planned = plan_repair(
            ckpt, rollback_to=rollback_to, snapshot=snapshot, progress=guards.progress
        )
        if planned.refused:
            raise CkptError(
                f"{storage.url}: cannot repair: {planned.refused[0]}",
                hint="ckpt validate shows every finding",
            )
        return planned

    done = run_change(
        storage,
        guards,
        command="ckpt repair",
        plan=plan,
        question=lambda plan: (
            f"Apply {len(plan.actions)} repair actions?" if plan.actions else None
        ),
        carry_out=lambda ckpt, plan: apply_repair(
            ckpt,
            plan,
            quarantine=quarantine,
            force=guards.force,
            min_age=guards.min_age,
            progress=guards.progress,
        ),
    )
    return RepairRun(done.plan, done.result, done.declined)
