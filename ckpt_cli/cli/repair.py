"""``ckpt repair``."""

from __future__ import annotations

import sys
import time
from contextlib import ExitStack
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ckpt_cli import exit_codes
from ckpt_cli.cli.cleanup import BreakLockOpt, ForceOpt, parse_duration
from ckpt_cli.cli.common import (
    STATE,
    JsonOpt,
    QuietOpt,
    StorageOpt,
    begin,
    error_boundary,
    parse_storage_options,
    progress_sink,
    stdout_console,
    write_json,
)
from ckpt_cli.errors import CkptError
from ckpt_cli.lock import checkpoint_lock
from ckpt_cli.model import Checkpoint
from ckpt_cli.repair import RepairPlan, apply_repair, plan_repair, undo_repair
from ckpt_cli.retention import check_min_age, check_not_active
from ckpt_cli.storage import Storage


@error_boundary
def repair(
    path: Annotated[
        str | None,
        typer.Argument(
            help="The checkpoint location (not needed with --undo).", show_default=False
        ),
    ] = None,
    apply: Annotated[bool, typer.Option("--apply", help="Carry the plan out.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask (scripts).")] = False,
    rollback_to: Annotated[
        int | None,
        typer.Option(
            "--rollback-to",
            help="Make this committed batch the last one (Spark re-runs the batches after it).",
            show_default=False,
        ),
    ] = None,
    snapshot: Annotated[
        bool,
        typer.Option(
            "--snapshot",
            help="Write a .snapshot of the restart version of every HDFS-backed partition.",
        ),
    ] = False,
    quarantine: Annotated[
        str | None,
        typer.Option(
            "--quarantine",
            help="Where removed files go (default: <checkpoint>.ckpt-quarantine/<time>/).",
            show_default=False,
        ),
    ] = None,
    undo: Annotated[
        str | None,
        typer.Option(
            "--undo",
            help="Put back everything the repair with this manifest changed.",
            show_default=False,
        ),
    ] = None,
    min_age: Annotated[
        str,
        typer.Option(
            "--min-age",
            help="Refuse to move or rewrite files modified more recently than this, and to "
            "repair while the newest offsets entry is (a running query). Below the default 1h "
            "needs --force.",
        ),
    ] = "1h",
    force: ForceOpt = False,
    break_lock: BreakLockOpt = False,
    json_output: JsonOpt = False,
    quiet: QuietOpt = False,
    storage_option: StorageOpt = None,
) -> None:
    """Bring a broken checkpoint back to one Spark restarts from, losing nothing.

    Reads validate's findings and plans the known repairs: quarantine temp files and damaged
    files of unfinished batches; roll back to the last batch Spark can restart from
    (--rollback-to N to choose it); rewrite checksum sidecars that no longer match files that
    read correctly; with --snapshot, write snapshots of the restart version. A dry run unless
    --apply. Nothing is deleted: removed files move to a quarantine folder with a manifest,
    and `ckpt repair --undo MANIFEST` restores the checkpoint byte for byte. Every apply ends
    with a validation. --apply and --undo hold the checkpoint lock (.ckpt-lock), and --apply
    refuses while the query looks active or a file to change is younger than --min-age,
    unless --force.

    Exit code 0 when the checkpoint is (now) healthy or there is nothing to do, 1 when the
    plan has repairs to apply or the checkpoint still has errors, 2 when repair refuses or
    cannot run.
    """
    begin(json_output=json_output, quiet=quiet)
    options = parse_storage_options(storage_option)
    age = parse_duration(min_age)
    check_min_age(age, force=force)
    if undo is not None:
        undone = undo_repair(undo, options, break_lock=break_lock, stats=STATE.requests)
        if json_output:
            write_json({"status": "ok", **undone})
        else:
            stdout_console().print(
                f"[green]Undone[/]: {undone['restored']} files put back, {undone['removed']} "
                f"created files removed in {undone['checkpoint']}"
            )
        raise typer.Exit(exit_codes.OK)
    if path is None:
        raise CkptError("give the checkpoint location (or --undo MANIFEST)")
    storage = Storage.from_url(path, options, STATE.requests)
    # --apply validates and plans under the lock: a second repair cannot act on a stale plan.
    with ExitStack() as lock:
        if apply:
            lock.enter_context(checkpoint_lock(storage, "ckpt repair", break_lock=break_lock))
        _repair(
            lock, storage, apply, yes, rollback_to, snapshot, quarantine, age, force, json_output
        )


def _repair(
    lock: ExitStack,
    storage: Storage,
    apply: bool,
    yes: bool,
    rollback_to: int | None,
    snapshot: bool,
    quarantine: str | None,
    min_age: float,
    force: bool,
    json_output: bool,
) -> None:
    ckpt = Checkpoint.open(storage, progress=progress_sink())
    plan = plan_repair(ckpt, rollback_to=rollback_to, snapshot=snapshot, progress=progress_sink())
    if plan.refused:
        raise CkptError(
            f"{ckpt.storage.url}: cannot repair: {plan.refused[0]}",
            hint="ckpt validate shows every finding",
        )
    console = stdout_console()
    if not json_output:
        render_plan(plan, console)
    if not apply or not plan.actions:
        lock.close()
        if json_output:
            write_json(
                {"status": "problems" if plan.actions else "ok", "applied": False, **plan.to_json()}
            )
        elif plan.actions:
            console.print("[dim]Dry run: nothing was changed. Add --apply to repair.[/]")
        raise typer.Exit(exit_codes.PROBLEMS if plan.actions else exit_codes.OK)
    check_not_active(ckpt, min_age=min_age, now=time.time(), force=force)  # before asking
    if not yes:
        if not sys.stdin.isatty():
            raise CkptError(
                "refusing to change the checkpoint without confirmation: stdin is not a terminal",
                hint="add --yes to repair unattended",
            )
        if not typer.confirm(f"Apply {len(plan.actions)} repair actions?", err=True):
            raise typer.Exit(exit_codes.OK)
    result = apply_repair(
        ckpt, plan, quarantine=quarantine, force=force, min_age=min_age, progress=progress_sink()
    )
    lock.close()  # released before the report, so --stats counts its requests too
    verdict = result.validation.to_json()
    if json_output:
        write_json(
            {
                "status": "ok" if verdict["ok"] else "problems",
                "applied": True,
                **plan.to_json(),
                "result": result.to_json(),
            }
        )
    else:
        console.print(
            f"[green]Repaired[/]: {result.moved} files quarantined, {result.rewritten} "
            f"rewritten, {result.written} written. Manifest (for --undo): {result.manifest}"
        )
        counts = verdict["counts"]
        state = "[bold green]OK[/]" if verdict["ok"] else "[bold red]NOT OK[/]"
        console.print(
            f"Validation after repair: {state} ({counts['error']} errors, "
            f"{counts['warning']} warnings, {counts['info']} info)"
        )
    raise typer.Exit(exit_codes.OK if verdict["ok"] else exit_codes.PROBLEMS)


def render_plan(plan: RepairPlan, console: Console) -> None:
    console.print(f"[bold]Checkpoint[/] {plan.checkpoint}")
    errors = [f for f in plan.findings if f.severity == "error"]
    console.print(
        f"[bold]Findings[/]   {len(errors)} errors, {len(plan.findings) - len(errors)} other"
    )
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
    elif not plan.refused:
        console.print("[green]Nothing to repair.[/]")
    for note in plan.notes:
        console.print(f"[yellow]note:[/] {note}")
    for reason in plan.refused:
        console.print(f"[red]refused:[/] {reason}")
