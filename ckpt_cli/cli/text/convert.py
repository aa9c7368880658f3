"""``ckpt convert`` as a plan table and what was written."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckpt_cli.api import ConvertPlan, ConvertRun
from ckpt_cli.cli.text import (
    plan_first,
    print_batch_plan,
    print_changed,
    print_notes,
    render_text,
    store_table,
)
from ckpt_cli.cli.text.fit import Flow
from ckpt_cli.units import human_bytes

if TYPE_CHECKING:
    from ckpt_cli.cli.output import TextRenderer


@render_text.register(ConvertPlan)
def _plan(plan: ConvertPlan, out: TextRenderer) -> None:
    if plan.nothing_to_do:
        print_notes(out, plan.notes)
        return
    what = f"{plan.provider_from} -> {plan.provider}"
    if plan.checkpoint_format_version != plan.format_version:
        what = (
            f"{plan.provider_from}, format v{plan.checkpoint_format_version} -> "
            f"{plan.provider}, format v{plan.format_version}"
        )
    elif not plan.reframes:
        what = f"{plan.provider}, format v{plan.format_version}: zip metadata v2 -> v1"
    table = store_table("State per operator and store", ["partitions", "keys", "bytes"])
    for s in plan.stores:
        table.add_row(
            str(s.operator),
            Flow.plain(s.store),
            str(s.partitions),
            f"{s.keys:,}",
            human_bytes(s.bytes),
        )
    moved = human_bytes(plan.moved_bytes)
    moves = f"{len(plan.moved)} {plan.provider_from} files ({moved}) to the quarantine"
    print_batch_plan(
        out, plan, plan.provider_from, "Conversion", what, body=[table], writes=("Moves", moves)
    )


@render_text.register(ConvertRun)
def _run(run: ConvertRun, out: TextRenderer) -> None:
    result = plan_first(run, out, idle=run.plan.nothing_to_do)
    if result is None:
        return
    written = f"{len(result.written)} files written ({human_bytes(sum(result.written.values()))})"
    done = f"{written}, {result.moved} moved to the quarantine"
    print_changed(out, result, ("Converted:", done), undo="convert", change="conversion")
