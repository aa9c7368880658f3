"""One change to a checkpoint as one call, whatever the command: plan, the safety checks,
confirm, lock, apply (the command writes its manifest first), validate.

The order is the point:

1. with ``apply``, a ``min_age`` below the default is refused unless ``force``, before
   anything is listed (``min_age=0`` would otherwise switch the activity check off);
2. the checkpoint lock is taken (only to apply: a dry run takes no lock and never refuses),
   then the checkpoint is listed and planned under it, so two changes cannot act on one
   stale plan;
3. the plan's warnings say what applying would refuse (a dry run says, it does not refuse);
4. with ``apply`` and something to do: the command's own checks (``check``; by default, an
   active query is refused unless ``force``), then the confirmation, then ``carry_out``
   (which writes its write-ahead manifest before its first change and validates the
   checkpoint after its last);
5. ``finish`` runs last, however it ends (a plan's staged files removed).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, cast

from ckpt_cli.change.lock import checkpoint_lock
from ckpt_cli.change.safety import check_min_age, check_not_active, plan_warnings
from ckpt_cli.core.activity import DEFAULT_MIN_AGE_SECONDS, query_activity
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.results import Confirm, Result
from ckpt_cli.storage import Storage


class ChangePlan(Protocol):
    """What a plan of a change has: warnings it gives instead of refusing."""

    warnings: list[str]


PlanT = TypeVar("PlanT", bound=Result)
DoneT = TypeVar("DoneT")


@dataclass(frozen=True)
class Guards:
    """What every change command (``run_cleanup``, ``run_repair``, ``run_repartition``) takes
    from its caller and hands to :func:`run_change` as it is: whether to apply, the safety
    overrides, the confirmation and the progress sink."""

    apply: bool = False
    force: bool = False
    min_age: float = DEFAULT_MIN_AGE_SECONDS
    break_lock: bool = False
    confirm: Confirm | None = None
    progress: ProgressSink = NULL_PROGRESS


@dataclass(frozen=True)
class Outcome(Generic[PlanT, DoneT]):
    """The plan, and what carrying it out did (None: a dry run, nothing to do, or declined)."""

    plan: PlanT
    result: DoneT | None = None
    declined: bool = False


def checked_before_planning(ckpt: Checkpoint, plan: object) -> None:
    """The ``check`` of a change that made its safety checks before planning (repartition
    checks before it reads the state): nothing more to check."""


def run_change(
    storage: Storage,
    guards: Guards,
    *,
    command: str,
    plan: Callable[[Checkpoint], PlanT],
    question: Callable[[PlanT], str | None],
    carry_out: Callable[[Checkpoint, PlanT], DoneT],
    check: Callable[[Checkpoint, PlanT], object] | None = None,
    finish: Callable[[Checkpoint, PlanT], None] | None = None,
) -> Outcome[PlanT, DoneT]:
    """``command`` (its name, for the lock) on the checkpoint at ``storage``, in the order
    above: ``plan`` it, and with ``guards.apply`` ask ``question`` (None: nothing to apply;
    "": carried out without asking; not asked when the plan's ``nothing_to_do`` is true) and
    ``carry_out`` the plan. The plan's ``warnings`` (a
    list) get what applying would refuse. ``check`` (None: refuse while the query looks
    active, unless ``guards.force``) runs before the confirmation."""
    apply, force = guards.apply, guards.force
    if apply:
        check_min_age(guards.min_age, force=force)  # before listing
    lock = checkpoint_lock(storage, command, break_lock=guards.break_lock)
    with lock if apply else nullcontext():
        ckpt = Checkpoint.open(storage, progress=guards.progress)
        planned = plan(ckpt)
        try:
            said = cast(ChangePlan, planned)  # every plan of a change has its warnings
            if not said.warnings:  # a planner may have said them itself
                activity = query_activity(ckpt, min_age=guards.min_age)
                said.warnings = plan_warnings(activity, force=force)
            # A plan that says it has nothing to do is not applied (nor asked about).
            idle = getattr(planned, "nothing_to_do", False) is True
            asked = question(planned) if apply and not idle else None
            if asked is None:
                return Outcome(planned)
            # Refused before asking, not after.
            if check is None:
                check_not_active(ckpt, min_age=guards.min_age, force=force)
            else:
                check(ckpt, planned)
            confirm = guards.confirm
            if asked and confirm is not None and not confirm(planned, asked):
                return Outcome(planned, declined=True)
            return Outcome(planned, carry_out(ckpt, planned))
        finally:
            if finish is not None:
                finish(ckpt, planned)
