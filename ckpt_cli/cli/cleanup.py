"""``ckpt orphans`` and ``ckpt cleanup``."""

from __future__ import annotations

import re
import sys
from contextlib import ExitStack
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ckpt_cli import exit_codes
from ckpt_cli.cli.common import (
    STATE,
    EngineOpt,
    JsonOpt,
    MasterOpt,
    PathArg,
    QuietOpt,
    StorageOpt,
    begin,
    error_boundary,
    parse_storage_options,
    progress_sink,
    stderr_console,
    stdout_console,
    write_json,
)
from ckpt_cli.cli.versions import human_bytes
from ckpt_cli.engine import make_engine
from ckpt_cli.errors import CkptError, UsageError
from ckpt_cli.lock import checkpoint_lock
from ckpt_cli.model import Checkpoint
from ckpt_cli.retention import (
    DESCRIPTIONS,
    CleanupPlan,
    apply_cleanup,
    check_min_age,
    check_not_active,
    plan_cleanup,
    scan_orphans,
)
from ckpt_cli.storage import Storage

_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str, option: str = "--min-age") -> float:
    """``30s``, ``15m``, ``12h``, ``3d``, ``1w`` or plain seconds; anything else is a usage
    error (one line, exit 2)."""
    match = re.fullmatch(r"\s*(\d{1,12}(?:\.\d{1,9})?)\s*([smhdw]?)\s*", text)
    if not match:
        raise UsageError(
            f"{option} {text!r}: expected a duration like 30s, 15m, 12h, 3d, 1w or plain seconds"
        )
    return float(match.group(1)) * _UNITS[match.group(2)]


RetainOpt = Annotated[
    int | None,
    typer.Option(
        "--retain",
        min=1,
        help="Batches to keep restartable (default: spark.sql.streaming.minBatchesToRetain "
        "from the offsets conf, else Spark's default 100).",
        show_default=False,
    ),
]
MinAgeOpt = Annotated[
    str,
    typer.Option(
        "--min-age",
        help="Never delete files modified more recently than this (30s, 15m, 12h, 3d, 1w or "
        "seconds). Below the default 1h, --apply needs --force.",
    ),
]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Go ahead although the query looks active, a file is younger than --min-age, or "
        "--min-age is below the default 1h.",
    ),
]
BreakLockOpt = Annotated[
    bool,
    typer.Option(
        "--break-lock",
        help="Remove a stale checkpoint lock (its process is gone, or it is older than 12 h) "
        "left by a killed cleanup or repair.",
    ),
]


@error_boundary
def orphans(
    path: PathArg,
    retain: RetainOpt = None,
    min_age: MinAgeOpt = "1h",
    show_files: Annotated[
        bool, typer.Option("--files", help="List every file, not only the totals per class.")
    ] = False,
    recursive: Annotated[
        bool,
        typer.Option(
            "--recursive",
            "-r",
            help="CHECKPOINT is a prefix: find every checkpoint under it and scan them all.",
        ),
    ] = False,
    engine: EngineOpt = "local",
    master: MasterOpt = None,
    json_output: JsonOpt = False,
    quiet: QuietOpt = False,
    storage_option: StorageOpt = None,
) -> None:
    """List the files no retained version needs, by class, with their bytes.

    Classes: state versions older than the retention window, RocksDB SST/log files no
    retained zip names, format-v2 files of task attempts the commit log did not choose, temp
    files of interrupted writes, old offsets/commits entries, superseded file-source log
    entries, and checksum sidecars of all of these. SST/log files no zip names that Spark's
    rule keeps (not older than every file a zip names) are listed as kept, with their bytes.
    Exit code 1 when there are files to remove (a cron job can alert), 0 when there are none.
    Changes nothing: `ckpt cleanup` removes them.
    """
    begin(json_output=json_output, quiet=quiet)
    options = parse_storage_options(storage_option)
    if recursive:
        plans = scan_orphans(
            Storage.from_url(path, options, STATE.requests),
            make_engine(engine, master=master),
            retain=retain,
            min_age=parse_duration(min_age),
            progress=progress_sink(),
        )
        any_found = any(p.get("files") for p in plans)
        failed = [p for p in plans if "error" in p]
        if json_output:
            status = "problems" if any_found or failed else "ok"
            write_json({"status": status, "checkpoints": plans})
        else:
            render_scan(plans, stdout_console())
        raise typer.Exit(exit_codes.PROBLEMS if any_found or failed else exit_codes.OK)
    ckpt = Checkpoint.open(path, options, progress=progress_sink(), stats=STATE.requests)
    plan = plan_cleanup(ckpt, retain=retain, min_age=parse_duration(min_age))
    found = bool(plan.deletions)
    if json_output:
        write_json({"status": "problems" if found else "ok", **plan.to_json()})
    else:
        render_plan(plan, stdout_console(), show_files=show_files, title="Orphans")
    raise typer.Exit(exit_codes.PROBLEMS if found else exit_codes.OK)


@error_boundary
def cleanup(
    path: PathArg,
    retain: RetainOpt = None,
    min_age: MinAgeOpt = "1h",
    apply: Annotated[
        bool, typer.Option("--apply", help="Delete the files (without it: a dry run).")
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Do not ask before deleting (cron).")
    ] = False,
    force: ForceOpt = False,
    break_lock: BreakLockOpt = False,
    manifest: Annotated[
        str | None,
        typer.Option(
            "--manifest",
            help="Where to write the JSON manifest of what is deleted (default: beside the "
            "checkpoint, <checkpoint>.ckpt-cleanup-<time>.json).",
            show_default=False,
        ),
    ] = None,
    show_files: Annotated[
        bool, typer.Option("--files", help="List every file of the plan.")
    ] = False,
    json_output: JsonOpt = False,
    quiet: QuietOpt = False,
    storage_option: StorageOpt = None,
) -> None:
    """Remove what no retained version needs, without ever breaking a restart.

    A dry run by default: prints the plan (files and bytes per class) and changes nothing.
    With --apply (and --yes for cron), writes a manifest of the plan, then deletes in an order
    that keeps every retained version loadable if interrupted: temp files, unchosen format-v2
    attempts and old versions' own files first, old log entries next, the SST/log files they
    referenced last. Files younger than --min-age are never deleted, and --apply refuses when
    the newest offsets entry is younger than --min-age (a running query) unless --force; a
    --min-age below the default 1h needs --force too. --apply holds the checkpoint lock
    (.ckpt-lock): a second cleanup or repair fails naming the holder.
    """
    begin(json_output=json_output, quiet=quiet)
    age = parse_duration(min_age)
    check_min_age(age, force=force)
    storage = Storage.from_url(path, parse_storage_options(storage_option), STATE.requests)
    # --apply lists and plans under the lock, so a second cleanup cannot act on a stale plan.
    with ExitStack() as lock:
        if apply:
            lock.enter_context(checkpoint_lock(storage, "ckpt cleanup", break_lock=break_lock))
        _cleanup(lock, storage, retain, age, apply, yes, force, manifest, show_files, json_output)


def _cleanup(
    lock: ExitStack,
    storage: Storage,
    retain: int | None,
    min_age: float,
    apply: bool,
    yes: bool,
    force: bool,
    manifest: str | None,
    show_files: bool,
    json_output: bool,
) -> None:
    ckpt = Checkpoint.open(storage, progress=progress_sink())
    plan = plan_cleanup(ckpt, retain=retain, min_age=min_age)
    console = stdout_console()
    if not json_output:
        render_plan(plan, console, show_files=show_files, title="Cleanup plan")
    if not apply:
        if json_output:
            write_json({"status": "ok", "applied": False, **plan.to_json()})
        elif plan.deletions:
            console.print("[dim]Dry run: nothing was deleted. Add --apply to delete.[/]")
        raise typer.Exit(exit_codes.OK)
    if plan.query_active and not force:
        check_not_active(ckpt, min_age=min_age, now=plan.now, force=force)  # fail before asking
    if plan.deletions and not yes:
        if not sys.stdin.isatty():
            raise CkptError(
                "refusing to delete without confirmation: stdin is not a terminal",
                hint="add --yes to delete unattended",
            )
        if not typer.confirm(
            f"Delete {len(plan.deletions)} files ({human_bytes(plan.bytes)})?", err=True
        ):
            raise typer.Exit(exit_codes.OK)
    result = apply_cleanup(ckpt, plan, manifest=manifest, force=force, progress=progress_sink())
    lock.close()  # released before the report, so --stats counts its requests too
    if json_output:
        write_json({"status": "ok", "applied": True, **plan.to_json(), "result": result.to_json()})
    else:
        console.print(
            f"[green]Deleted[/] {result.deleted} files ({human_bytes(result.bytes)}) in "
            f"{result.delete_requests} delete requests"
            + (f"; manifest: {result.manifest}" if result.manifest else "")
        )
        for rel, why in result.refused.items():
            stderr_console().print(f"[yellow]not deleted:[/] {rel}: {why}", soft_wrap=True)
        if not STATE.quiet and plan.kept_young:
            stderr_console().print(
                f"[dim]{len(plan.kept_young)} files were kept because they are younger than "
                "--min-age.[/]"
            )
    raise typer.Exit(exit_codes.OK)


def render_scan(plans: list[dict[str, Any]], console: Console) -> None:
    table = Table(title="Orphans per checkpoint", title_justify="left")
    table.add_column("checkpoint", overflow="fold")
    table.add_column("files", justify="right")
    table.add_column("bytes", justify="right")
    table.add_column("classes", overflow="fold")
    for p in plans:
        if "error" in p:
            table.add_row(p["checkpoint"], "-", "-", f"[red]{p['error']}[/]")
            continue
        classes = ", ".join(p["by_class"])
        kept = p.get("kept") or []
        if kept:
            kept_bytes = human_bytes(sum(k["size"] for k in kept))
            classes += f"{'; ' if classes else ''}{len(kept)} kept ({kept_bytes})"
        table.add_row(p["checkpoint"], str(p["files"]), human_bytes(p["bytes"]), classes)
    console.print(table)
    total = sum(p.get("files", 0) for p in plans)
    console.print(f"{len(plans)} checkpoints, {total} files no retained version needs")


def render_plan(plan: CleanupPlan, console: Console, *, show_files: bool, title: str) -> None:
    console.print(
        f"[bold]Checkpoint[/] {plan.checkpoint} · latest committed batch "
        f"{plan.latest_committed if plan.latest_committed is not None else 'none'} · retaining "
        f"{plan.retain} batches ({plan.retain_source})"
    )
    if plan.query_active:
        console.print(
            f"[yellow]The query looks active: newest offsets entry written "
            f"{plan.newest_offsets_age:.0f} s ago.[/]"
        )
    by_class = plan.by_class()
    if not by_class:
        console.print("[green]Nothing to remove.[/]")
    else:
        table = Table(title=title, title_justify="left")
        table.add_column("class")
        table.add_column("files", justify="right")
        table.add_column("bytes", justify="right")
        table.add_column("what")
        for klass, totals in by_class.items():
            table.add_row(
                klass, str(totals["files"]), human_bytes(totals["bytes"]), DESCRIPTIONS[klass]
            )
        table.add_row(
            "[bold]total", f"[bold]{len(plan.deletions)}", f"[bold]{human_bytes(plan.bytes)}", ""
        )
        console.print(table)
    if show_files:
        for d in plan.deletions:
            console.print(f"  {d.klass:<20} {d.path}  [dim]{d.reason}[/]")
    if plan.kept_young:
        console.print(
            f"[dim]{len(plan.kept_young)} more files would qualify but are younger than "
            f"--min-age ({plan.min_age:.0f} s).[/]"
        )
    if plan.kept:
        # Spark's rules keep these; they are shown so that nothing takes space unseen.
        console.print(
            f"[yellow]{len(plan.kept)} files no retained version needs are kept "
            f"({human_bytes(sum(d.size for d in plan.kept))}):[/]"
        )
        listed = plan.kept if show_files or len(plan.kept) <= 10 else plan.kept[:10]
        for d in listed:
            console.print(f"  kept {d.path} ({human_bytes(d.size)})  [dim]{d.reason}[/]")
        if len(listed) < len(plan.kept):
            console.print(f"  [dim]... {len(plan.kept) - len(listed)} more (--files lists all)[/]")
    for skipped in plan.skipped:
        console.print(f"[yellow]kept everything in {skipped['path']}:[/] {skipped['reason']}")
