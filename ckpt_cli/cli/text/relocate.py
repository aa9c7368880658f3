"""``ckpt relocate`` as a plan and what was copied."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckpt_cli.api import RelocatePlan, RelocateRun, RelocateUndoResult
from ckpt_cli.cli.output import cli_words
from ckpt_cli.cli.text import plan_first, print_validation, print_warnings, render_text
from ckpt_cli.cli.text.fit import FitTable, Flow, labelled
from ckpt_cli.units import human_bytes

if TYPE_CHECKING:
    from ckpt_cli.cli.output import TextRenderer


@render_text.register(RelocatePlan)
def _plan(plan: RelocatePlan, out: TextRenderer) -> None:
    console = out.console
    console.print(labelled("Checkpoint", "bold", plan.source))
    resumed = " (resuming an earlier copy)" if plan.resuming else ""
    console.print(
        labelled(
            "Copy to",
            "bold",
            f"{plan.dest}{resumed}: {len(plan.files):,} files, {human_bytes(plan.bytes)}; "
            f"Spark will name it {plan.spark_home}",
        )
    )
    if plan.rewrites:
        table = FitTable(title="Rewritten on the way", title_justify="left")
        table.add_column("file")
        table.add_column("refs", justify="right")
        table.add_column("from")
        table.add_column("to")
        for r in plan.rewrites:
            table.add_row(
                Flow.plain(r.path), str(r.references), Flow.plain(r.old), Flow.plain(r.new)
            )
        console.print(table)
    else:
        console.print(labelled("Rewrites", "bold", "none: no absolute reference to rewrite"))
    for note in plan.notes:
        console.print(labelled("note:", "yellow", cli_words(note)))
    print_warnings(plan.warnings)


@render_text.register(RelocateRun)
def _run(run: RelocateRun, out: TextRenderer) -> None:
    result = plan_first(run, out, dry_run="Dry run: nothing was copied. Add --apply to copy.")
    if result is None:
        return
    kept = f", {result.kept} already there" if result.kept else ""
    out.console.print(
        labelled(
            "Relocated:",
            "green",
            f"{result.copied} files copied, {result.rewritten} rewritten{kept} "
            f"({human_bytes(result.bytes)}) into {result.dest}.",
        )
    )
    print_validation(out, "relocation", result.validation)


@render_text.register(RelocateUndoResult)
def _undo(undone: RelocateUndoResult, out: TextRenderer) -> None:
    if not undone.removed:
        out.console.print(labelled("Nothing to undo:", "yellow", f"{undone.dest} holds no copy"))
        return
    others = f" ({undone.others} the checkpoint does not have)" if undone.others else ""
    out.console.print(
        labelled(
            "Undone:",
            "green",
            f"the copy of {undone.source} removed from {undone.dest}: {undone.removed} "
            f"files{others}",
        )
    )
