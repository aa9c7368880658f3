"""``ckpt orphans`` and ``ckpt cleanup`` as tables."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from ckpt_cli.api import DESCRIPTIONS, CleanupPlan, CleanupRun, OrphanScan, ScanFailure
from ckpt_cli.cli.common import STATE, stderr_console
from ckpt_cli.cli.text import plan_first, print_warnings, render_text
from ckpt_cli.cli.text.fit import FitTable, Flow, entry, labelled
from ckpt_cli.units import human_bytes, natural_key

if TYPE_CHECKING:
    from ckpt_cli.cli.output import TextRenderer


@render_text.register(OrphanScan)
def _scan(scan: OrphanScan, out: TextRenderer) -> None:
    table = FitTable(title="Orphans per checkpoint", title_justify="left")
    table.add_column("checkpoint")
    table.add_column("files", justify="right")
    table.add_column("bytes", justify="right")
    table.add_column("classes")
    for p in sorted(scan.checkpoints, key=lambda p: natural_key(p.checkpoint)):
        if isinstance(p, ScanFailure):
            table.add_row(Flow.plain(p.checkpoint), "-", "-", Flow.plain(p.error, style="red"))
            continue
        classes = ", ".join(p.by_class())
        if p.kept:
            kept_bytes = human_bytes(sum(k.size for k in p.kept))
            classes += f"{'; ' if classes else ''}{len(p.kept):,} kept ({kept_bytes})"
        table.add_row(
            Flow.plain(p.checkpoint), f"{len(p.deletions):,}", human_bytes(p.bytes), classes
        )
    out.console.print(table)
    total = sum(len(p.deletions) for p in scan.checkpoints if isinstance(p, CleanupPlan))
    out.console.print(
        f"{len(scan.checkpoints):,} checkpoints, {total:,} files no retained version needs"
    )


@render_text.register(CleanupPlan)
def _plan(plan: CleanupPlan, out: TextRenderer) -> None:
    console = out.console
    show_files = bool(out.options.get("show_files"))
    last = plan.latest_committed if plan.latest_committed is not None else "none"
    console.print(
        Flow(
            Text.assemble(
                ("Checkpoint ", "bold"),
                f"{plan.checkpoint} · latest committed batch {last} · retaining {plan.retain} "
                f"batches ({plan.retain_source})",
            ),
            indent=11,
        )
    )
    print_warnings(plan.warnings)
    by_class = plan.by_class()
    if not by_class:
        console.print("[green]Nothing to remove.[/]")
    else:
        table = FitTable(title=out.options.get("title", "Orphans"), title_justify="left")
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
        # By path, partitions as numbers, each checksum right after its file.
        for d in sorted(
            plan.deletions, key=lambda d: (natural_key(d.covers or d.path), d.covers is not None)
        ):
            console.print(entry(d.klass, d.path, Text(d.reason, style="dim")))
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
            console.print(
                entry("kept", d.path, Text(f"{human_bytes(d.size)}: {d.reason}", style="dim"))
            )
        if len(listed) < len(plan.kept):
            more = len(plan.kept) - len(listed)
            console.print(f"  [dim]... {more:,} more (--files lists all)[/]")
    for skipped in plan.skipped:
        console.print(labelled(f"kept everything in {skipped.path}:", "yellow", skipped.reason))


@render_text.register(CleanupRun)
def _run(run: CleanupRun, out: TextRenderer) -> None:
    plan = run.plan
    note = "Dry run: nothing was deleted. Add --apply to delete."
    result = plan_first(run, out, dry_run=note, idle=not plan.deletions)
    if result is None:
        return
    manifest = f"; manifest: {result.manifest}" if result.manifest else ""
    requests = f"{result.delete_requests} delete requests"
    deleted = f"{result.deleted} files ({human_bytes(result.bytes)}) in {requests}{manifest}"
    out.console.print(labelled("Deleted", "green", deleted))
    for rel, why in result.refused.items():
        line = Text.assemble(("not deleted:", "yellow"), f" {rel}: {why}")
        stderr_console().print(line, soft_wrap=True)
    if not STATE.quiet and plan.kept_young:
        stderr_console().print(
            f"[dim]{len(plan.kept_young):,} files were kept because they are younger than "
            "--min-age.[/]"
        )
