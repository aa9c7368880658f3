"""``ckpt validate`` as findings grouped by severity, and a verdict. A finding is a few lines
(its code and path, the problem, the hint) rather than a table row: a path then has the
terminal's whole width and never breaks inside a file name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from ckpt_cli.api import ERROR, INFO, WARNING, ValidationReport
from ckpt_cli.cli.text import render_text
from ckpt_cli.cli.text.fit import entry, field
from ckpt_cli.units import natural_key

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
    console.print(field("Checkpoint", data["checkpoint"]))
    console.print(field("Checked", scope))
    findings = data["findings"]
    for severity in (ERROR, WARNING, INFO):
        group = [f for f in findings if f["severity"] == severity]
        if not group:
            continue
        console.print()
        console.print(f"{severity.capitalize()}s ({len(group):,})", style=_STYLE[severity])
        for f in sorted(
            group, key=lambda f: (natural_key(f["paths"][0] if f["paths"] else ""), f["code"])
        ):
            where = f["paths"][0] if f["paths"] else ""
            message = f["message"]
            if where and message.startswith(f"{where}: "):
                message = message[len(where) + 2 :]  # the path is on the line above
            more = len(f["paths"]) - 1
            also = (
                Text(f"and {more:,} more file{'s' * (more != 1)} (--json lists them)", style="dim")
                if more > 0
                else ""
            )
            hint = Text(f"hint: {f['hint']}", style="dim") if f["hint"] else ""
            console.print(entry(f["code"], where, message, also, hint, style=_STYLE[severity]))
    s = data["stats"]
    console.print()
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
