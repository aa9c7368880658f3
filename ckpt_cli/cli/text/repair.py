"""``ckpt repair`` as a plan table and what was done."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from ckpt_cli.cli.output import cli_words
from ckpt_cli.cli.text import plan_first, print_warnings, render_text
from ckpt_cli.repair import RepairPlan, RepairRun, UndoResult

if TYPE_CHECKING:
    from ckpt_cli.cli.output import TextRenderer


@render_text.register(RepairPlan)
def _plan(plan: RepairPlan, out: TextRenderer) -> None:
    console = out.console
    console.print(f"[bold]Checkpoint[/] {plan.checkpoint}")
    errors = [f for f in plan.findings if f.severity == "error"]
    console.print(
        f"[bold]Findings[/]   {len(errors):,} errors, {len(plan.findings) - len(errors):,} other"
    )
    if plan.scope:
        console.print(f"[bold]Judged[/]     {plan.scope}")
    if plan.rollback_to is not None:
        console.print(f"[bold]Rollback[/]   to batch {plan.rollback_to}")
    if plan.actions:
        table = Table(title="Repair plan", title_justify="left")
        table.add_column("action")
        table.add_column("file", overflow="fold")
        table.add_column("why", overflow="fold")
        for a in plan.actions:
            table.add_row(a.kind, a.path, a.reason)
        console.print(table)
    elif not plan.refused and not any(f["restart"] for f in plan.left):
        console.print("[green]Nothing to repair[/]: a restart finds what it needs.")
    elif not plan.refused:
        console.print("[red]Nothing repair can do[/] about the errors a restart meets:")
    if plan.left:
        table = Table(title="Left as they are", title_justify="left")
        table.add_column("code", no_wrap=True)
        table.add_column("file", overflow="fold")
        table.add_column("why", overflow="fold")
        for f in plan.left:
            table.add_row(f["code"], f["paths"][0] if f["paths"] else "", cli_words(f["why"]))
        console.print(table)
    for note in plan.notes:
        console.print(f"[yellow]note:[/] {cli_words(note)}")
    print_warnings(plan.warnings)
    for reason in plan.refused:
        console.print(f"[red]refused:[/] {cli_words(reason)}")


@render_text.register(RepairRun)
def _run(run: RepairRun, out: TextRenderer) -> None:
    plan, result = run.plan, run.result
    quiet = run.declined or not plan.actions
    note = "" if quiet else "Dry run: nothing was changed. Add --apply to repair."
    plan_first(plan, out, applied=result is not None, dry_run=note)
    if result is None:
        return
    out.console.print(
        f"[green]Repaired[/]: {result.moved} files quarantined, {result.rewritten} "
        f"rewritten, {result.written} written. Manifest (for --undo): {result.manifest}"
    )
    verdict = result.validation.to_json()
    counts = verdict["counts"]
    state = "[bold green]OK[/]" if verdict["ok"] else "[bold red]NOT OK[/]"
    out.console.print(
        f"Validation after repair: {state} ({counts['error']} errors, "
        f"{counts['warning']} warnings, {counts['info']} info)"
    )


@render_text.register(UndoResult)
def _undo(undone: UndoResult, out: TextRenderer) -> None:
    if undone.already_undone:
        out.console.print(
            f"[yellow]Already undone[/] (at {undone.already_undone}): {undone.manifest}; "
            "nothing was changed."
        )
        return
    out.console.print(
        f"[green]Undone[/]: {undone.restored} files put back, {undone.removed} "
        f"created files removed in {undone.checkpoint} (from {undone.manifest})"
    )
