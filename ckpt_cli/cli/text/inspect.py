"""``ckpt inspect`` as a grid of facts, the first rows and the problems."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from ckpt_cli.api import FileReport
from ckpt_cli.cli.text import render_text
from ckpt_cli.cli.text.fit import FitTable, Flow, labelled
from ckpt_cli.units import human_bytes, human_duration

if TYPE_CHECKING:
    from ckpt_cli.cli.output import TextRenderer


def _short(value: Any, width: int = 100) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= width else text[: width - 1] + "…"


def _time(iso: str | None) -> str:
    """An ISO time with how long ago it was; None is Spark's 0: none yet."""
    if iso is None:
        return "none"
    then = dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    ago = (dt.datetime.now(dt.timezone.utc) - then).total_seconds()
    return f"{iso} ({human_duration(ago)} ago)"


@render_text.register(FileReport)
def _file(result: FileReport, out: TextRenderer) -> None:
    console = out.console
    report = result.to_json()
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    grid.add_row("File", Flow.plain(report["path"]))
    grid.add_row("Kind", report["kind"])
    grid.add_row("Size", human_bytes(report["size"]))
    if report.get("store"):
        s = report["store"]
        where = f"operator {s['operator']} · partition {s['partition']} · store {s['store']}"
        if report.get("version") is not None:
            where += f" · version {report['version']}"
        if report.get("unique_id"):
            where += f" · uniqueId {report['unique_id']}"
        grid.add_row("State", where)
    if report.get("batch") is not None:
        grid.add_row("Batch", str(report["batch"]))
    if report.get("target"):
        grid.add_row("Covers", Flow.plain(report["target"]))
    if "codec" in report:
        codec = report["codec"] or "unknown"
        if report["codec"] and report["codec"] != report["configured_codec"]:
            codec += f" (conf says {report['configured_codec']})"
        grid.add_row("Codec", codec)
    if report.get("changelog_format_version") is not None:
        grid.add_row("Changelog", f"format v{report['changelog_format_version']}")
    if report.get("lineage") is not None:
        lineage = ", ".join(f"{e['version']}_{e['unique_id'][:8]}" for e in report["lineage"])
        grid.add_row("Lineage", lineage or "(empty: no ancestors)")
    recs = report.get("records")
    if recs:
        if "puts" in recs:
            text = (
                f"{recs['total']} ({recs['puts']} puts, {recs['deletes']} deletes, "
                f"{recs['merges']} merges) · {human_bytes(recs['decompressed_bytes'])} decompressed"
            )
            text += " · end marker found" if recs["complete"] else " · [red]no end marker[/]"
        else:
            text = f"{recs['total']} keys"
        grid.add_row("Records", text)
    meta = report.get("metadata")
    if meta:
        grid.add_row("numKeys", str(meta["num_keys"]))
        files = meta["shared_files"]
        ok = sum(1 for f in files if f["status"] == "ok")
        grid.add_row("Shared files", f"{len(files):,} named, {ok:,} present with the right size")
        entries = ", ".join(e["name"] for e in report["zip_entries"])
        grid.add_row("Zip entries", entries)
    for check in report.get("checksums", []):
        state = Text("ok") if check["ok"] else Text("bad", style="red")
        grid.add_row("Checksum", Flow(Text(f"{check['path']}: ") + state))
    header = report.get("header")
    if header:
        for key, value in header.items():
            if key.endswith("_ms") and key[:-3] in header:
                continue  # shown in human form under its name without _ms
            if key.endswith(("_timestamp", "_watermark")) or key == "batch_watermark":
                value = _time(value)
            grid.add_row(key, _short(value))
    for source in report.get("sources", []):
        name = f"source {source['index']}" + (f" ({source['id']})" if "id" in source else "")
        grid.add_row(name, _short(source["offset"] if source["offset"] is not None else "-"))
    console.print(grid)
    rows = report.get("rows")
    if rows:
        table = FitTable(title=f"First {len(rows):,} rows", title_justify="left")
        has_type = "type" in rows[0]
        if has_type:
            table.add_column("type")
        table.add_column("key", overflow="fold")
        table.add_column("value", overflow="fold")
        for row in rows:
            cells = [
                _short(row["key"], 60),
                _short(row["value"], 80) if row["value"] is not None else "-",
            ]
            table.add_row(*([row["type"]] if has_type else []), *cells)
        console.print(table)
    for problem in report["problems"]:
        console.print(labelled("problem:", "red", problem))
