"""``ckpt repartition`` as one call (plan, confirm, apply), and ``--undo``."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ckpt_cli.change.flow import Guards, checked_before_planning, run_change
from ckpt_cli.change.safety import check_stopped
from ckpt_cli.change.undo import UndoResult, batch_change_undo
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.progress import NULL_PROGRESS
from ckpt_cli.repartition.apply import (
    RepartitionResult,
    default_quarantine,
    drop_if_unused,
    repartition,
    staged_plan,
)
from ckpt_cli.repartition.plan import RepartitionPlan, plan_repartition
from ckpt_cli.results import ChangeRun
from ckpt_cli.storage import Storage

if TYPE_CHECKING:
    from ckpt_cli.engine import Engine


@dataclass(frozen=True)
class RepartitionRun(ChangeRun[RepartitionPlan, RepartitionResult]):
    """``ckpt repartition``: the plan, and what was written when it was applied."""


def run_repartition(
    storage: Storage,
    guards: Guards = Guards(),
    *,
    partitions: int,
    quarantine: str | None = None,
    engine: Engine | None = None,
) -> RepartitionRun:
    """Plan, and with ``guards.apply`` write, the repartition to ``partitions``. Applying
    plans under the checkpoint lock and reads the state once (the plan stages the records it
    places).
    ``engine``: where partitions are read and written (Spark: as tasks, see
    :mod:`ckpt_cli.repartition.tasks`); the results are the same. A dry run never refuses for
    safety: the plan's ``warnings`` say what applying would refuse."""
    places: dict[str, str] = {}

    def plan(ckpt: Checkpoint) -> RepartitionPlan:
        now = time.time()
        where = places.setdefault("where", quarantine or default_quarantine(ckpt, now))
        if guards.apply:
            check_stopped(ckpt, min_age=guards.min_age, now=now, force=guards.force)  # first
            return staged_plan(ckpt, partitions, where, engine, guards.progress)
        return plan_repartition(
            ckpt, partitions=partitions, engine=engine, progress=guards.progress
        )

    def finish(ckpt: Checkpoint, plan: RepartitionPlan) -> None:
        plan.discard()
        if guards.apply:
            drop_if_unused(ckpt, places["where"])

    done = run_change(
        storage,
        guards,
        command="ckpt repartition",
        plan=plan,
        question=lambda plan: (
            f"Repartition from {plan.from_partitions} to {plan.partitions} partitions "
            f"(batch {plan.batch})?"
        ),
        check=checked_before_planning,
        carry_out=lambda ckpt, plan: repartition(
            ckpt, plan, guards, quarantine=places["where"], engine=engine
        ),
        finish=finish,
    )
    return RepartitionRun(done.plan, done.result, done.declined)


def repartition_checkpoint(
    ckpt: Checkpoint,
    *,
    partitions: int,
    force: bool = False,
    quarantine: str | None = None,
    engine: Engine | None = None,
) -> RepartitionResult:
    """Change the number of state partitions to ``partitions`` now, as Spark's own repartition
    does (``ckpt repartition --apply --yes``): refused while the query looks active unless
    ``force``. ``.manifest`` is what :func:`undo_repartition` restores from. ``engine``: where
    partitions are read and written (``SparkEngine``: as tasks)."""
    where = quarantine or default_quarantine(ckpt, time.time())
    plan = staged_plan(ckpt, partitions, where, engine, NULL_PROGRESS)
    try:
        return repartition(ckpt, plan, Guards(force=force), quarantine=where, engine=engine)
    finally:
        plan.discard()


undo_repartition: Callable[..., UndoResult] = batch_change_undo(
    "repartition",
    __name__,
    """Put the checkpoint back as it was before its newest repartition (finished or not), or
    the one of ``manifest``, as :func:`ckpt_cli.change.undo.undo_change` does. Refused (unless
    ``force``) when the query ran batches after it: undoing would throw their state away.""",
)
