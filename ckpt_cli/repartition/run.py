"""``ckpt repartition`` as one call (plan, confirm, apply), and ``--undo``."""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ckpt_cli.cleanup.safety import (
    DEFAULT_MIN_AGE_SECONDS,
    check_stopped,
    links_refused,
    plan_warnings,
    query_activity,
)
from ckpt_cli.errors import CheckpointNotFound, CkptError, SafetyCheckError
from ckpt_cli.lock import checkpoint_lock
from ckpt_cli.model import Checkpoint
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.repair.undo import UndoResult, undo_repair
from ckpt_cli.repartition.apply import (
    REPARTITION_PREFIX,
    RepartitionResult,
    default_quarantine,
    drop_if_unused,
    repartition,
    staged_plan,
)
from ckpt_cli.repartition.plan import RepartitionPlan, plan_repartition
from ckpt_cli.results import Confirm, PlanRun
from ckpt_cli.storage import Storage, StorageStats

if TYPE_CHECKING:
    from ckpt_cli.engine import Engine


@dataclass(frozen=True)
class RepartitionRun(PlanRun[RepartitionPlan, RepartitionResult]):
    """``ckpt repartition``: the plan, and what was written when it was applied. Problems
    only when the checkpoint does not validate after the repartition."""

    @property
    def ok(self) -> bool:
        return self.result.validation.ok if self.result is not None else True


def run_repartition(
    storage: Storage,
    *,
    partitions: int,
    apply: bool = False,
    quarantine: str | None = None,
    force: bool = False,
    min_age: float = DEFAULT_MIN_AGE_SECONDS,
    break_lock: bool = False,
    confirm: Confirm | None = None,
    engine: Engine | None = None,
    progress: ProgressSink = NULL_PROGRESS,
) -> RepartitionRun:
    """Plan, and with ``apply`` write, the repartition to ``partitions``. Applying plans under
    the checkpoint lock and reads the state once (the plan stages the records it places).
    ``engine``: where partitions are read and written (Spark: as tasks, see
    :mod:`ckpt_cli.repartition.tasks`); the results are the same. A dry run never refuses for
    safety: the plan's ``warnings`` say what applying would refuse."""
    lock = checkpoint_lock(storage, "ckpt repartition", break_lock=break_lock)
    with lock if apply else nullcontext():
        ckpt = Checkpoint.open(storage, progress=progress)
        now = time.time()
        where = quarantine or default_quarantine(ckpt, now)
        if apply:
            check_stopped(ckpt, min_age=min_age, now=now, force=force)  # before reading
            plan = staged_plan(ckpt, partitions, where, engine, progress)
        else:
            plan = plan_repartition(ckpt, partitions=partitions, engine=engine, progress=progress)
        activity = query_activity(ckpt, min_age=min_age, now=now)
        plan.warnings = plan_warnings(activity, force=force)
        try:
            if not apply:
                return RepartitionRun(plan)
            question = (
                f"Repartition from {plan.from_partitions} to {plan.partitions} partitions "
                f"(batch {plan.batch})?"
            )
            if confirm is not None and not confirm(plan, question):
                return RepartitionRun(plan, declined=True)
            result = repartition(
                ckpt,
                plan,
                quarantine=where,
                force=force,
                min_age=min_age,
                break_lock=break_lock,
                engine=engine,
                progress=progress,
            )
            return RepartitionRun(plan, result)
        finally:
            plan.discard()
            if apply:
                drop_if_unused(ckpt, where)


def _quarantine_root(storage: Storage) -> str:
    return f"{storage.url.rstrip('/')}.ckpt-quarantine"


def latest_manifest(
    storage: Storage, storage_options: dict[str, Any] | None, stats: StorageStats | None
) -> tuple[str, dict[str, Any]]:
    """The newest repartition manifest beside the checkpoint not undone yet, and its body."""
    root = _quarantine_root(storage)
    none = CkptError(
        f"{storage.url}: no repartition to undo (no {REPARTITION_PREFIX}*/manifest.json in {root})"
    )
    try:
        folder = Storage.from_url(root, storage_options, stats)
        entries = list(folder.list_all())
    except CheckpointNotFound as exc:
        raise none from exc
    found = []
    for entry in entries:
        head, _, name = entry.path.partition("/")
        if head.startswith(REPARTITION_PREFIX) and name == "manifest.json":
            body = json.loads(folder.read_bytes(entry.path))
            if not body.get("undone"):
                found.append((body.get("created", 0), f"{root}/{entry.path}", body))
    if not found:
        raise none
    _, path, body = max(found, key=lambda x: (x[0], x[1]))
    return path, body


def undo_repartition(
    location: str,
    storage_options: dict[str, Any] | None = None,
    *,
    quarantine: str | None = None,
    force: bool = False,
    break_lock: bool = False,
    stats: StorageStats | None = None,
) -> UndoResult:
    """Put the checkpoint back as it was before the newest repartition (finished or not),
    from its manifest (the one in ``quarantine`` when the repartition was given one).
    Refused (unless ``force``) when the query ran batches after it: undoing would throw
    their state away."""
    storage = Storage.from_url(location, storage_options, stats)
    if quarantine is None:
        manifest, body = latest_manifest(storage, storage_options, stats)
    else:
        manifest = f"{quarantine.rstrip('/')}/manifest.json"
        try:
            body = json.loads(storage.read_text_absolute(manifest))
        except CheckpointNotFound as exc:
            raise CkptError(f"{manifest}: no such manifest") from exc
        if not isinstance(body, dict) or "repartition" not in body:
            raise CkptError(f"{manifest}: not a ckpt repartition manifest")
    batch = int(body["repartition"]["batch"])
    ckpt = Checkpoint.open(storage)
    links = links_refused(ckpt)
    if links:  # refused before the first change, not part way through
        raise SafetyCheckError(f"{storage.url}: not undoing the repartition: {links[0]}")
    later = [b for b in ckpt.batches.offsets + ckpt.batches.commits if b > batch]
    if later and not force:
        raise SafetyCheckError(
            f"{storage.url}: the query ran batch {max(later)} after the repartition (batch "
            f"{batch}); undoing it would lose that state",
            hint="pass force=True to undo anyway",
        )
    undone = undo_repair(
        manifest,
        storage_options,
        break_lock=break_lock,
        stats=stats,
        command="ckpt repartition --undo",
    )
    body["undone"] = time.time()
    storage.write_bytes_absolute(
        manifest,
        json.dumps(body, indent=1).encode(),
        within=manifest.rpartition("/")[0],
        atomic=True,
    )
    return undone
