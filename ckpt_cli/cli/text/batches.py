"""``ckpt batches`` as a table, oldest batch first."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rich.markup import escape

from ckpt_cli.api import BatchesReport, BatchRow, SourceProgress
from ckpt_cli.cli.text import render_text
from ckpt_cli.cli.text.fit import FitTable, Flow
from ckpt_cli.units import human_duration

if TYPE_CHECKING:
    from ckpt_cli.cli.output import TextRenderer

KAFKA_COLUMNS = 4
_STATE_STYLE = {
    "committed": "green",
    "in-flight": "yellow",
    "not-committed": "red",
    "offsets-missing": "red",
}


def signed(n: int | None) -> str:
    return "?" if n is None else f"{n:+,}"


def source_text(s: SourceProgress) -> str:
    """What a batch read from one source, in a few words."""
    if s.kind == "none":
        return "no offset yet"
    if s.kind == "file":
        if s.files_added is None:
            return f"? files (log {s.offset.get('logOffset')})"
        return f"+{s.files_added:,} file{'' if s.files_added == 1 else 's'}"
    if s.kind == "kafka":
        return f"{'?' if s.records is None else format(s.records, ',')} records"
    if s.kind == "rate":
        return f"rate {s.offset:,} s ({signed(s.change)})"
    if s.kind == "long":
        return f"{s.offset:,} ({signed(s.change)})"
    text = json.dumps(s.offset, separators=(",", ":"))
    return text if len(text) <= 40 else text[:39] + "…"


def _row_cells(row: BatchRow) -> list[str]:
    style = _STATE_STYLE.get(row.state, "")
    state = f"[{style}]{row.state}[/]" if style else row.state
    if row.problem:
        return [f"{row.batch:,}", "-", "-", "-", state, f"[red]{escape(row.problem)}[/]"]
    if row.planned is None:
        return [f"{row.batch:,}", "-", "-", "-", state, "[dim]no offsets entry[/]"]
    age = human_duration(row.age_seconds) if row.age_seconds is not None else "-"
    several = len(row.sources) > 1
    sources = "\n".join(escape(f"{s.source}: " * several + source_text(s)) for s in row.sources)
    return [f"{row.batch:,}", when(row.planned), age, when(row.watermark), state, sources or "-"]


def when(iso: str | None) -> str:
    """An ISO time from the library, shorter for a table: ``2026-11-22 21:17:07``."""
    return iso[:19].replace("T", " ") if iso else "none"


@render_text.register(BatchesReport)
def _batches(report: BatchesReport, out: TextRenderer) -> None:
    console = out.console
    if not report.batches:
        console.print(Flow.plain(f"{report.checkpoint}: no batches in the range asked for"))
        return
    # The location on a line of its own: a table's title would break it anywhere.
    console.print(Flow.plain(report.checkpoint, style="bold"))
    table = FitTable()
    for name, justify in (
        ("batch", "right"),
        ("planned (UTC)", "left"),
        ("age", "right"),  # how long ago it was planned
        ("watermark", "left"),
        ("state", "left"),
        ("read", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=name != "read")  # type: ignore[arg-type]
    for row in report.batches:
        table.add_row(*_row_cells(row))
    console.print(table)
    last = report.latest_committed
    notes = [f"last committed {last:,}" if last is not None else "nothing committed"]
    if report.in_flight:
        notes.append(f"in flight {', '.join(f'{b:,}' for b in report.in_flight)}")
    if report.offsets_gaps or report.commits_gaps:
        notes.append(
            f"[yellow]holes: offsets {len(report.offsets_gaps):,}, "
            f"commits {len(report.commits_gaps):,}[/]"
        )
    console.print(" · ".join(notes))
    for source in sorted(
        {s.source for r in report.batches for s in r.sources if s.kind == "kafka"}
    ):
        _kafka_table(report, source, out)


def _kafka_table(report: BatchesReport, source: int, out: TextRenderer) -> None:
    """A Kafka source's offsets: a row per batch, a column per topic-partition (the first
    KAFKA_COLUMNS; --json has them all), each with its change since the batch before."""
    rows = [
        (row.batch, {(p.topic, p.partition): p for p in s.partitions or ()})
        for row in report.batches
        for s in row.sources
        if s.source == source and s.kind == "kafka"
    ]
    names = sorted({name for _, parts in rows for name in parts})
    table = FitTable(title=f"Source {source} (Kafka): offsets", title_justify="left")
    table.add_column("batch", justify="right")
    for topic, partition in names[:KAFKA_COLUMNS]:
        table.add_column(f"{topic}[{partition}]", justify="right")
    for batch, parts in rows:
        cells = [
            f"{parts[n].offset:,} ({signed(parts[n].change)})" if n in parts else "-"
            for n in names[:KAFKA_COLUMNS]
        ]
        table.add_row(f"{batch:,}", *cells)
    out.console.print()
    out.console.print(table)
    if len(names) > KAFKA_COLUMNS:
        out.console.print(f"[dim]… and {len(names) - KAFKA_COLUMNS:,} more partitions (--json)[/]")
