"""``ckpt repair`` as a plan table and what was done."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckpt_cli.api import RepairPlan, RepairRun, UndoResult
from ckpt_cli.cli.output import cli_words
from ckpt_cli.cli.text import plan_first, print_notes, print_validation, render_text
from ckpt_cli.cli.text.fit import entry, field, labelled

if TYPE_CHECKING:
    from ckpt_cli.cli.output import TextRenderer


@render_text.register(RepairPlan)
def _plan(plan: RepairPlan, out: TextRenderer) -> None:
    console = out.console
    console.print(field("Checkpoint", plan.checkpoint))
    errors = [f for f in plan.findings if f.severity == "error"]
    other = len(plan.findings) - len(errors)
    console.print(field("Findings", f"{len(errors):,} errors, {other:,} other"))
    if plan.scope:
        console.print(field("Judged", plan.scope))
    if plan.rollback_to is not None:
        console.print(field("Rollback", f"to batch {plan.rollback_to}"))
    if plan.actions:
        console.print()
        console.print(f"[bold]Repair plan[/] ({len(plan.actions):,} actions)")
        for a in plan.actions:
            console.print(entry(a.kind, a.path, a.reason, style="cyan"))
    elif not plan.refused and not any(f["restart"] for f in plan.left):
        console.print("[green]Nothing to repair[/]: a restart finds what it needs.")
    elif not plan.refused:
        console.print("[red]Nothing repair can do[/] about the errors a restart meets:")
    if plan.left:
        console.print()
        console.print(f"[bold]Left as they are[/] ({len(plan.left):,} findings)")
        for f in plan.left:
            where = f["paths"][0] if f["paths"] else ""
            console.print(entry(f["code"], where, cli_words(f["why"]), style="yellow"))
    print_notes(out, plan.notes, plan.warnings)
    for reason in plan.refused:
        console.print(labelled("refused:", "red", cli_words(reason)))


@render_text.register(RepairRun)
def _run(run: RepairRun, out: TextRenderer) -> None:
    note = "Dry run: nothing was changed. Add --apply to repair."
    result = plan_first(run, out, dry_run=note, idle=not run.plan.actions)
    if result is None:
        return
    out.console.print(
        labelled(
            "Repaired:",
            "green",
            f"{result.moved} files quarantined, {result.rewritten} rewritten, "
            f"{result.written} written; `ckpt repair CHECKPOINT --undo` puts them back "
            f"(manifest: {result.manifest}).",
        )
    )
    print_validation(out, "repair", result.validation)


@render_text.register(UndoResult)
def _undo(undone: UndoResult, out: TextRenderer) -> None:
    if undone.already_undone:
        out.console.print(
            labelled(
                "Already undone",
                "yellow",
                f"(at {undone.already_undone}): {undone.manifest}; nothing was changed.",
            )
        )
        return
    out.console.print(
        labelled(
            "Undone:",
            "green",
            f"{undone.restored} files put back, {undone.removed} created files removed in "
            f"{undone.checkpoint} (from {undone.manifest})",
        )
    )
