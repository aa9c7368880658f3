"""``ckpt convert`` as a plan table and what was written."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckpt_cli.api import ConvertPlan, ConvertRun
from ckpt_cli.cli.text import (
    plan_first,
    print_batch_change,
    print_changed,
    print_notes,
    render_text,
)
from ckpt_cli.cli.text.fit import FitTable, Flow, labelled
from ckpt_cli.units import human_bytes

if TYPE_CHECKING:
    from ckpt_cli.cli.output import TextRenderer


@render_text.register(ConvertPlan)
def _plan(plan: ConvertPlan, out: TextRenderer) -> None:
    console = out.console
    if plan.nothing_to_do:
        print_notes(out, plan.notes)
        return
    what = f"{plan.provider_from} -> {plan.provider}"
    print_batch_change(out, plan, plan.provider_from, "Conversion", what)
    table = FitTable(title="State per operator and store", title_justify="left")
    table.add_column("op", justify="right")
    table.add_column("store")
    table.add_column("partitions", justify="right")
    table.add_column("keys", justify="right")
    table.add_column("bytes", justify="right")
    for s in plan.stores:
        table.add_row(
            str(s.operator),
            Flow.plain(s.store),
            str(s.partitions),
            f"{s.keys:,}",
            human_bytes(s.bytes),
        )
    console.print(table)
    console.print(
        labelled(
            "Moves",
            "bold",
            f"{len(plan.moved)} {plan.provider_from} files ({human_bytes(plan.moved_bytes)}) "
            "to the quarantine",
        )
    )
    print_notes(out, plan.notes, plan.warnings)


@render_text.register(ConvertRun)
def _run(run: ConvertRun, out: TextRenderer) -> None:
    result = plan_first(run, out, idle=run.plan.nothing_to_do)
    if result is None:
        return
    written = f"{len(result.written)} files written ({human_bytes(sum(result.written.values()))})"
    done = f"{written}, {result.moved} moved to the quarantine"
    print_changed(out, result, ("Converted:", done), undo="convert", change="conversion")
