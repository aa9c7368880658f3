"""``ckpt state delete`` as one call (plan, confirm, apply), and ``--undo``."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ckpt_cli.change.flow import Guards, run_change
from ckpt_cli.change.manifest import fresh_quarantine
from ckpt_cli.change.undo import UndoResult, batch_change_undo
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.delete.apply import DELETE_PREFIX, DeleteResult, apply_plan
from ckpt_cli.delete.plan import DeletePlan, plan_delete
from ckpt_cli.engine import Engine
from ckpt_cli.results import ChangeRun
from ckpt_cli.storage import Storage


@dataclass(frozen=True)
class DeleteRun(ChangeRun[DeletePlan, DeleteResult]):
    """``ckpt state delete``: the plan, and what was written when it was applied."""


def run_delete(
    storage: Storage,
    guards: Guards,
    *,
    operator: int,
    where: str | None = None,
    keys: list[dict[str, Any]] | None = None,
    output: str | None = None,
    state_var: str | None = None,
    timers: bool = False,
    quarantine: str | None = None,
    engine: Engine | None = None,
) -> DeleteRun:
    """Plan, and with ``guards.apply`` write, the deletion of ``operator``'s keys that match
    ``where`` or are among ``keys`` (``output``: the matched rows written there first;
    transformWithState: ``state_var`` or ``timers`` to remove them from that variable or the
    timers only; ``engine``: a distributed one matches and writes each partition as a task).
    A dry run never refuses for safety: the plan's ``warnings`` say what applying would
    refuse."""

    def carry_out(ckpt: Checkpoint, plan: DeletePlan) -> DeleteResult:
        now = time.time()
        where_to = quarantine or fresh_quarantine(ckpt.storage, DELETE_PREFIX, now)
        return apply_plan(ckpt, plan, where_to, guards.progress, engine)

    done = run_change(
        storage,
        guards,
        command="ckpt state delete",
        plan=lambda ckpt: plan_delete(
            ckpt,
            operator=operator,
            where=where,
            keys=keys,
            output=output,
            state_var=state_var,
            timers=timers,
            progress=guards.progress,
            engine=engine,
        ),
        question=lambda plan: (
            f"Delete {sum(p.matched for p in plan.partitions):,} keys of state/{plan.operator} "
            f"(batch {plan.batch})?"
        ),
        carry_out=carry_out,
    )
    return DeleteRun(done.plan, done.result, done.declined)


undo_delete: Callable[..., UndoResult] = batch_change_undo(
    "delete",
    __name__,
    """Put the checkpoint back as it was before its newest key deletion (finished or not), or
    the one of ``manifest``. Refused (unless ``force``) when the query ran batches after it:
    undoing would throw their state away.""",
)
