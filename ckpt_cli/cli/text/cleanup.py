"""``ckpt orphans`` and ``ckpt cleanup`` as tables."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from ckpt_cli.cleanup import CleanupPlan, CleanupRun, OrphanScan, ScanFailure
from ckpt_cli.cleanup.plan import DESCRIPTIONS
from ckpt_cli.cli.common import STATE, stderr_console
from ckpt_cli.cli.text import plan_first, print_warnings, render_text
from ckpt_cli.units import human_bytes

if TYPE_CHECKING:
    from ckpt_cli.cli.output import TextRenderer


@render_text.register(OrphanScan)
def _scan(scan: OrphanScan, out: TextRenderer) -> None:
    table = Table(title="Orphans per checkpoint", title_justify="left")
    table.add_column("checkpoint", overflow="fold")
    table.add_column("files", justify="right")
    table.add_column("bytes", justify="right")
    table.add_column("classes", overflow="fold")
    for p in scan.checkpoints:
        if isinstance(p, ScanFailure):
            table.add_row(p.checkpoint, "-", "-", f"[red]{p.error}[/]")
            continue
        classes = ", ".join(p.by_class())
        if p.kept:
            kept_bytes = human_bytes(sum(k.size for k in p.kept))
            classes += f"{'; ' if classes else ''}{len(p.kept):,} kept ({kept_bytes})"
        table.add_row(p.checkpoint, f"{len(p.deletions):,}", human_bytes(p.bytes), classes)
    out.console.print(table)
    total = sum(len(p.deletions) for p in scan.checkpoints if isinstance(p, CleanupPlan))
    out.console.print(
        f"{len(scan.checkpoints):,} checkpoints, {total:,} files no retained version needs"
    )


@render_text.register(CleanupPlan)
def _plan(plan: CleanupPlan, out: TextRenderer) -> None:
    console = out.console
    show_files = bool(out.options.get("show_files"))
    console.print(
        f"[bold]Checkpoint[/] {plan.checkpoint} · latest committed batch "
        f"{plan.latest_committed if plan.latest_committed is not None else 'none'} · retaining "
        f"{plan.retain} batches ({plan.retain_source})"
    )
    print_warnings(plan.warnings)
    by_class = plan.by_class()
    if not by_class:
        console.print("[green]Nothing to remove.[/]")
    else:
        table = Table(title=out.options.get("title", "Orphans"), title_justify="left")
        table.add_column("class")
        table.add_column("files", justify="right")
        table.add_column("bytes", justify="right")
        table.add_column("what")
        for klass, totals in by_class.items():
            table.add_row(
                klass, f"{totals['files']:,}", human_bytes(totals["bytes"]), DESCRIPTIONS[klass]
            )
        table.add_row(
            "[bold]total", f"[bold]{len(plan.deletions):,}", f"[bold]{human_bytes(plan.bytes)}", ""
        )
        console.print(table)
    if show_files:
        for d in plan.deletions:
            console.print(f"  {d.klass:<20} {d.path}  [dim]{d.reason}[/]")
    if plan.kept_young:
        console.print(
            f"[dim]{len(plan.kept_young):,} more files would qualify but are younger than "
            f"--min-age ({plan.min_age:.0f} s).[/]"
        )
    if plan.kept:
        # Spark's rules keep these; they are shown so that nothing takes space unseen.
        console.print(
            f"[yellow]{len(plan.kept):,} files no retained version needs are kept "
            f"({human_bytes(sum(d.size for d in plan.kept))}):[/]"
        )
        listed = plan.kept if show_files or len(plan.kept) <= 10 else plan.kept[:10]
        for d in listed:
            console.print(f"  kept {d.path} ({human_bytes(d.size)})  [dim]{d.reason}[/]")
        if len(listed) < len(plan.kept):
            more = len(plan.kept) - len(listed)
            console.print(f"  [dim]... {more:,} more (--files lists all)[/]")
    for skipped in plan.skipped:
        console.print(f"[yellow]kept everything in {skipped.path}:[/] {skipped.reason}")


@render_text.register(CleanupRun)
def _run(run: CleanupRun, out: TextRenderer) -> None:
    plan, result = run.plan, run.result
    quiet = run.declined or not plan.deletions
    note = "" if quiet else "Dry run: nothing was deleted. Add --apply to delete."
    plan_first(plan, out, applied=result is not None, dry_run=note)
    if result is None:
        return
    out.console.print(
        f"[green]Deleted[/] {result.deleted} files ({human_bytes(result.bytes)}) in "
        f"{result.delete_requests} delete requests"
        + (f"; manifest: {result.manifest}" if result.manifest else "")
    )
    for rel, why in result.refused.items():
        stderr_console().print(f"[yellow]not deleted:[/] {rel}: {why}", soft_wrap=True)
    if not STATE.quiet and plan.kept_young:
        stderr_console().print(
            f"[dim]{len(plan.kept_young):,} files were kept because they are younger than "
            "--min-age.[/]"
        )
