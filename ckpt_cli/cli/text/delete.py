"""``ckpt state delete`` as a plan table and what was written."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ckpt_cli.api import DeletePlan, DeleteRun
from ckpt_cli.cli.text import plan_first, print_batch_plan, print_changed, render_text
from ckpt_cli.cli.text.fit import FitTable, Flow
from ckpt_cli.units import human_bytes

if TYPE_CHECKING:
    from rich.console import RenderableType

    from ckpt_cli.cli.output import TextRenderer

_WRITES = {
    "delta": "a .delta of removals",
    "changelog": "a changelog of deletes",
    "snapshot": "a new zip of the keys left",
}


@render_text.register(DeletePlan)
def _plan(plan: DeletePlan, out: TextRenderer) -> None:
    matched = sum(p.matched for p in plan.partitions)
    what = f"state/{plan.operator} where {plan.selection}"
    body: list[RenderableType] = []
    if matched:
        table = FitTable(title="Keys matched per partition", title_justify="left")
        table.add_column("partition", justify="right")
        table.add_column("keys", justify="right")
        table.add_column("matched", justify="right")
        table.add_column("bytes", justify="right")
        for p in plan.partitions:
            if p.matched:
                table.add_row(
                    str(p.partition), f"{p.keys:,}", f"{p.matched:,}", human_bytes(p.bytes)
                )
        body.append(table)
        for row in plan.sample:
            # A sample row, its continuation lines indented under it.
            body.append(Flow.plain(f"  e.g. {json.dumps(row, default=str)}", indent=7))
    total = sum(p.keys for p in plan.partitions)
    deletes = (
        f"{matched:,} of {total:,} keys ({human_bytes(sum(p.bytes for p in plan.partitions))}),"
        f" written as {_WRITES[plan.writes]}"
        + (f"; the matched rows are in {plan.output}" if plan.output else "")
    )
    print_batch_plan(
        out, plan, plan.provider, "Deletion", what, body=body, writes=("Deletes", deletes)
    )


@render_text.register(DeleteRun)
def _run(run: DeleteRun, out: TextRenderer) -> None:
    result = plan_first(run, out, idle=run.plan.nothing_to_do)
    if result is not None:
        keys = "key" if result.removed == 1 else "keys"
        done = f"{result.removed:,} {keys}, {len(result.written)} files written"
        print_changed(out, result, ("Deleted:", done), undo="state delete", change="deletion")
