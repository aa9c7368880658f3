"""Carrying a cleanup plan out: the manifest first, then deletions in the plan's order."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from ckpt_cli.change.flow import Guards, run_change
from ckpt_cli.change.lock import checkpoint_lock
from ckpt_cli.change.safety import check_old_enough, check_stopped
from ckpt_cli.cleanup.plan import CleanupPlan, Deletion
from ckpt_cli.cleanup.retention import plan_cleanup
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.results import FieldsJson, PlanRun
from ckpt_cli.storage import Storage
from ckpt_cli.units import human_bytes


@dataclass(frozen=True)
class CleanupResult(FieldsJson):
    """What :func:`apply_cleanup` deleted."""

    deleted: int
    bytes: int
    delete_requests: int
    manifest: str | None
    # Planned files left alone because they resolve outside the checkpoint: path -> why.
    refused: dict[str, str] = field(default_factory=dict)


def default_manifest_location(ckpt: Checkpoint, now: float) -> str:
    """Beside the checkpoint (not inside it: Spark would see an unknown file)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    root = ckpt.storage.root.rstrip("/")
    return f"{root}.ckpt-cleanup-{stamp}.json"


def check_apply(ckpt: Checkpoint, plan: CleanupPlan, *, force: bool, now: float | None) -> None:
    """The safety checks of :func:`apply_cleanup`, to run before asking for a confirmation."""
    now = time.time() if now is None else now
    check_stopped(ckpt, min_age=plan.min_age, now=now, force=force)
    check_old_enough(
        ckpt, (d.path for d in plan.deletions), min_age=plan.min_age, now=now, force=force
    )


def apply_cleanup(
    ckpt: Checkpoint,
    plan: CleanupPlan,
    *,
    manifest: str | None = None,
    batch_size: int = 1000,
    force: bool = False,
    now: float | None = None,
    break_lock: bool = False,
    progress: ProgressSink = NULL_PROGRESS,
) -> CleanupResult:
    """Write the manifest, then delete the plan's files in its order, in batches.

    The safety checks are here, whatever the caller: a ``plan.min_age`` below the default, an
    active query (its last batch planned and offsets/ written within ``plan.min_age``, see
    :func:`~ckpt_cli.change.safety.query_activity`) and files younger than it are refused
    unless ``force``; files resolving outside the checkpoint are left alone and
    returned in ``refused``; the checkpoint lock is held while deleting (``break_lock``: take
    over a stale one, see :mod:`ckpt_cli.change.lock`).
    """
    check_apply(ckpt, plan, force=force, now=now)
    refused = ckpt.storage.outside([d.path for d in plan.deletions])
    deletions = [d for d in plan.deletions if d.path not in refused]
    if not deletions:
        return CleanupResult(0, 0, 0, None, refused)
    with checkpoint_lock(ckpt.storage, "ckpt cleanup", break_lock=break_lock):
        location = manifest or default_manifest_location(ckpt, plan.now)
        body = json.dumps({"plan": plan.body_json(), "written_at": time.time()}, indent=1)
        ckpt.storage.write_text_absolute(location, body)
        deleted = nbytes = requests = 0
        progress.start("Deleting", total=len(deletions))
        try:
            for chunk in _chunks(deletions, batch_size):
                requests += ckpt.storage.delete_many([d.path for d in chunk])
                deleted += len(chunk)
                nbytes += sum(d.size for d in chunk)
                progress.advance(len(chunk))
        finally:
            progress.close()
    return CleanupResult(deleted, nbytes, requests, location, refused)


def _chunks(items: list[Deletion], size: int) -> Iterable[list[Deletion]]:
    # Consecutive slices of the ordered plan, sent one after the other: an interrupted run
    # has deleted a prefix of the order (a request is the unit of interruption on an object
    # store, which deletes one request's keys in no promised order anyway), and a plan takes
    # exactly ceil(files / size) requests, a chunk spanning two phases when it must.
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass(frozen=True)
class CleanupRun(PlanRun[CleanupPlan, CleanupResult]):
    """``ckpt cleanup``: never a problem, dry run or not (``ckpt orphans`` is the check that
    fails when there is something to remove)."""

    @property
    def ok(self) -> bool:
        return True


def run_cleanup(
    storage: Storage,
    guards: Guards = Guards(),
    *,
    retain: int | None = None,
    manifest: str | None = None,
) -> CleanupRun:
    """``ckpt cleanup`` as one call: plan, and with ``guards.apply`` delete (files younger than
    ``guards.min_age`` are kept). Applying lists and plans
    under the checkpoint lock, so a second cleanup cannot act on a stale plan; the lock is
    released before this returns. A dry run never refuses for safety: the plan's
    ``warnings`` say what applying would refuse."""
    done = run_change(
        storage,
        guards,
        command="ckpt cleanup",
        plan=lambda ckpt: plan_cleanup(
            ckpt, retain=retain, min_age=guards.min_age, force=guards.force
        ),
        # Nothing to delete is still applied (a result saying so), without asking.
        question=lambda plan: (
            f"Delete {len(plan.deletions)} files ({human_bytes(plan.bytes)})?"
            if plan.deletions
            else ""
        ),
        check=lambda ckpt, plan: check_apply(ckpt, plan, force=guards.force, now=None),
        carry_out=lambda ckpt, plan: apply_cleanup(
            ckpt, plan, manifest=manifest, force=guards.force, progress=guards.progress
        ),
    )
    return CleanupRun(done.plan, done.result, done.declined)
