"""``ckpt validate`` as findings grouped by severity, and a verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from ckpt_cli.cli.text import render_text
from ckpt_cli.validate import ERROR, INFO, WARNING, ValidationReport

if TYPE_CHECKING:
    from ckpt_cli.cli.output import TextRenderer


_STYLE = {ERROR: "bold red", WARNING: "yellow", INFO: "cyan"}


@render_text.register(ValidationReport)
def _validation(result: ValidationReport, out: TextRenderer) -> None:
    console, fail_on = out.console, result.fail_on
    data = result.to_json()
    target = data["target"]
    restart = (
        f"restart from batch {target['batch']} (state version {target['version']})"
        if target["batch"] is not None
        else "restart (no committed batch yet)"
    )
    wide = target["scope"] == "all-versions" or target["deep"]
    scope = (
        "every retained version, every file decoded (deep)"
        if target["deep"]
        else "every retained version"
        if wide
        else f"what a {restart} loads"
    )
    console.print(f"[bold]Checkpoint[/] {data['checkpoint']}")
    console.print(f"[bold]Checked[/]    {scope}")
    findings = data["findings"]
    for severity in (ERROR, WARNING, INFO):
        group = [f for f in findings if f["severity"] == severity]
        if not group:
            continue
        table = Table(
            title=f"{severity.capitalize()}s ({len(group):,})",
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
    if data["ok"] and wide:
        console.print(f"[bold green]OK[/]: every retained version loads ({summary})")
    elif data["ok"]:
        console.print(f"[bold green]OK[/]: the query can restart from this checkpoint ({summary})")
    else:
        console.print(f"[bold red]NOT OK[/]: findings at or above {fail_on} ({summary})")
    if wide and not data["ok"]:
        console.print(
            f"[dim]This scope judges every retained version; whether a {restart} works is "
            "what `ckpt validate` without --all-versions/--deep says, and `ckpt repair` says "
            "what it does about each finding.[/]"
        )
