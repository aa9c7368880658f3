"""``ckpt validate``."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
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
    stdout_console,
    write_json,
)
from ckpt_cli.engine import make_engine
from ckpt_cli.errors import CkptError
from ckpt_cli.model import Checkpoint
from ckpt_cli.validate import ERROR, INFO, WARNING, junit_xml, validate


class FailOn(str, Enum):
    error = "error"
    warning = "warning"


@error_boundary
def validate_command(
    path: PathArg,
    batch: Annotated[
        int | None,
        typer.Option(
            "--batch",
            help="Check what restarting from this committed batch needs (default: the latest).",
            show_default=False,
        ),
    ] = None,
    all_versions: Annotated[
        bool,
        typer.Option(
            "--all-versions", help="Check that every retained state version can be loaded."
        ),
    ] = False,
    deep: Annotated[
        bool,
        typer.Option(
            "--deep",
            help="Decode every state file end to end and verify every checksum sidecar.",
        ),
    ] = False,
    fail_on: Annotated[
        FailOn, typer.Option("--fail-on", help="Exit 1 when a finding of this severity or worse.")
    ] = FailOn.error,
    junit: Annotated[
        Path | None,
        typer.Option("--junit", help="Also write a JUnit XML report here.", show_default=False),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", min=1, help="Parallel reads (default: 4 per core).", show_default=False
        ),
    ] = None,
    engine: EngineOpt = "local",
    master: MasterOpt = None,
    json_output: JsonOpt = False,
    quiet: QuietOpt = False,
    storage_option: StorageOpt = None,
) -> None:
    """Check that the query can restart from this checkpoint, and say why not.

    By default checks what Spark needs to restart from the latest committed batch (and to
    re-run a batch in flight): the metadata file, the latest offsets and commit entries, and
    for every state store partition the files that load version latest+1 (snapshot and
    deltas, zip and changelogs, the format-v2 lineage), decoded end to end with their
    checksum sidecars. Every finding has a code, a severity (error / warning / info), the
    paths, and a hint.

    Exit code 0 when nothing at or above --fail-on is found, 1 when something is, 2 when
    validation could not run.
    """
    begin(json_output=json_output, quiet=quiet)
    ckpt = Checkpoint.open(
        path,
        parse_storage_options(storage_option),
        progress=progress_sink(),
        stats=STATE.requests,
    )
    report = validate(
        ckpt,
        batch=batch,
        all_versions=all_versions,
        deep=deep,
        workers=workers,
        progress=progress_sink(),
        engine=make_engine(engine, workers=workers, master=master),
    )
    level = fail_on.value
    if junit is not None:
        try:
            junit.write_text(junit_xml(report, level))
        except OSError as exc:
            raise CkptError(f"{junit}: cannot write the JUnit report: {exc.strerror}") from exc
    data = report.to_json(level)
    if json_output:
        write_json({"status": "ok" if data["ok"] else "problems", **data})
    else:
        render(data, stdout_console(), level)
    raise typer.Exit(exit_codes.OK if data["ok"] else exit_codes.PROBLEMS)


_STYLE = {ERROR: "bold red", WARNING: "yellow", INFO: "cyan"}


def render(data: dict[str, Any], console: Console, fail_on: str) -> None:
    target = data["target"]
    scope = (
        "every retained version"
        if target["scope"] == "all-versions"
        else f"restart from batch {target['batch']} (state version {target['version']})"
        if target["batch"] is not None
        else "restart (no committed batch yet)"
    )
    console.print(f"[bold]Checkpoint[/] {data['checkpoint']}")
    console.print(f"[bold]Checked[/]    {scope}{' · deep' if target['deep'] else ''}")
    findings = data["findings"]
    for severity in (ERROR, WARNING, INFO):
        group = [f for f in findings if f["severity"] == severity]
        if not group:
            continue
        table = Table(
            title=f"{severity.capitalize()}s ({len(group)})",
            title_justify="left",
            title_style=_STYLE[severity],
            show_lines=False,
        )
        table.add_column("code", style=_STYLE[severity], no_wrap=True)
        table.add_column("where", overflow="fold")
        table.add_column("what", overflow="fold")
        for f in sorted(group, key=lambda f: (f["paths"][:1], f["code"])):
            where = f["paths"][0] if f["paths"] else ""
            table.add_row(f["code"], where, f"{f['message']}\n[dim]hint: {f['hint']}[/]")
        console.print(table)
    s = data["stats"]
    console.print(
        f"[dim]{s['files_listed']} files listed · {s['versions_checked']} state versions and "
        f"{s['files_checked']} files checked · {s['files_read']} reads, "
        f"{s['bytes_read']:,} bytes · {s['seconds']} s[/]"
    )
    if s.get("orphans_unresolved"):
        console.print(
            f"[dim]{s['orphans_unresolved']} SST/log files of partitions with many zips not "
            "matched against the older zips (--all-versions does, as ckpt orphans)[/]"
        )
    c = data["counts"]
    summary = f"{c[ERROR]} errors, {c[WARNING]} warnings, {c[INFO]} info"
    if data["ok"]:
        console.print(f"[bold green]OK[/]: the query can restart from this checkpoint ({summary})")
    else:
        console.print(f"[bold red]NOT OK[/]: findings at or above {fail_on} ({summary})")
