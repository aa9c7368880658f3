"""``ckpt relocate`` as one call: plan, the safety checks, confirm, copy."""

from __future__ import annotations

from dataclasses import dataclass

from ckpt_cli.change.flow import Guards, run_change
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.relocate.apply import RelocateResult, relocate
from ckpt_cli.relocate.plan import RelocatePlan, plan_relocate
from ckpt_cli.results import ChangeRun
from ckpt_cli.storage import Storage


@dataclass(frozen=True)
class RelocateRun(ChangeRun[RelocatePlan, RelocateResult]):
    """``ckpt relocate``: the plan, and what was copied when it was applied."""


def run_relocate(
    storage: Storage,
    dest: Storage,
    guards: Guards,
    *,
    inputs: list[tuple[str, str]] | None = None,
    spark_home: str | None = None,
) -> RelocateRun:
    """Plan, and with ``guards.apply`` write, the copy of the checkpoint at ``storage`` into
    ``dest`` with every absolute reference to its home (and with ``inputs``, to its input
    files) rewritten. The source is only read: under its lock, refused while its query looks
    active unless ``guards.force``. A dry run never refuses for safety: the plan's
    ``warnings`` say what applying would refuse."""
    done = run_change(
        storage,
        guards,
        command="ckpt relocate",
        plan=lambda ckpt: plan_relocate(ckpt, dest, inputs=inputs, spark_home=spark_home),
        question=lambda plan: f"Copy {len(plan.files):,} files to {plan.dest}?",
        carry_out=lambda ckpt, plan: relocate(ckpt, plan, dest, guards.progress),
    )
    return RelocateRun(done.plan, done.result, done.declined)


def relocate_checkpoint(
    ckpt: Checkpoint,
    dest: str,
    *,
    inputs: list[tuple[str, str]] | None = None,
    force: bool = False,
    storage_options: dict[str, object] | None = None,
) -> RelocateResult | None:
    """Copy the checkpoint to ``dest`` (a path or URL) now, rewriting its absolute references
    (``ckpt relocate --apply --yes``); refused while the query looks active unless
    ``force``."""
    target = Storage.from_url(dest, storage_options)
    run = run_relocate(ckpt.storage, target, Guards(apply=True, force=force), inputs=inputs)
    return run.result
