"""``ckpt convert`` as one call (plan, confirm, apply), and ``--undo``."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ckpt_cli.change.flow import Guards, run_change
from ckpt_cli.change.manifest import fresh_quarantine
from ckpt_cli.change.undo import UndoResult, batch_change_undo
from ckpt_cli.convert.apply import CONVERT_PREFIX, ConvertResult, apply_plan
from ckpt_cli.convert.plan import ConvertPlan, plan_convert
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.engine import Engine
from ckpt_cli.results import ChangeRun
from ckpt_cli.storage import Storage

# A dry run: nothing applied, nothing asked.
NO_GUARDS = Guards()


@dataclass(frozen=True)
class ConvertRun(ChangeRun[ConvertPlan, ConvertResult]):
    """``ckpt convert``: the plan, and what was written when it was applied."""


def run_convert(
    storage: Storage,
    guards: Guards = NO_GUARDS,
    *,
    provider: str | None = None,
    format_version: int | None = None,
    quarantine: str | None = None,
    engine: Engine | None = None,
) -> ConvertRun:
    """Plan, and with ``guards.apply`` write, the conversion of the checkpoint's state to
    ``provider`` (``hdfs`` or ``rocksdb``; None: the one it has) and RocksDB checkpoint
    ``format_version`` (1 or 2; None: the one it has). A dry run never refuses for safety:
    the plan's ``warnings`` say what applying would refuse. ``engine``: where the store
    partitions are read and written (Spark: as tasks, see :mod:`ckpt_cli.convert.tasks`)."""
    places: dict[str, str] = {}

    def carry_out(ckpt: Checkpoint, plan: ConvertPlan) -> ConvertResult:
        now = time.time()
        where = places.setdefault(
            "where", quarantine or fresh_quarantine(ckpt.storage, CONVERT_PREFIX, now)
        )
        return apply_plan(ckpt, plan, where, now, guards.progress, engine)

    done = run_change(
        storage,
        guards,
        command="ckpt convert",
        plan=lambda ckpt: plan_convert(
            ckpt,
            provider=provider,
            format_version=format_version,
            progress=guards.progress,
            engine=engine,
        ),
        question=lambda plan: (
            f"Convert the state {_change(plan)} (batch {plan.batch}, {plan.keys:,} keys)?"
        ),
        carry_out=carry_out,
    )
    return ConvertRun(done.plan, done.result, done.declined)


def _change(plan: ConvertPlan) -> str:
    """``from hdfs to rocksdb``, ``from format v2 to v1``, or both."""
    parts = []
    if plan.provider_from != plan.provider:
        parts.append(f"from {plan.provider_from} to {plan.provider}")
    if plan.checkpoint_format_version != plan.format_version:
        parts.append(f"from format v{plan.checkpoint_format_version} to v{plan.format_version}")
    return ", ".join(parts) or "to zips with metadata v1"


def convert_checkpoint(
    ckpt: Checkpoint,
    *,
    provider: str | None = None,
    format_version: int | None = None,
    force: bool = False,
    quarantine: str | None = None,
    engine: Engine | None = None,
) -> ConvertResult | None:
    """Convert the state to ``provider`` and/or ``format_version`` now (``ckpt convert
    --apply --yes``): refused while the query looks active unless ``force``; None when there
    is nothing to convert. ``.manifest`` is what :func:`undo_convert` restores from."""
    run = run_convert(
        ckpt.storage,
        Guards(apply=True, force=force),
        provider=provider,
        format_version=format_version,
        quarantine=quarantine,
        engine=engine,
    )
    return run.result


undo_convert: Callable[..., UndoResult] = batch_change_undo(
    "convert",
    __name__,
    """Put the checkpoint back as it was before its newest conversion (finished or not), or
    the one of ``manifest``. Refused (unless ``force``) when the query ran batches after it:
    undoing would throw their state away.""",
)


__all__ = ["ConvertRun", "convert_checkpoint", "run_convert", "undo_convert"]
