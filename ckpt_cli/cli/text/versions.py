"""``ckpt versions`` as tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from ckpt_cli.api import Headline, OperatorVersions, PartitionVersions, VersionsReport
from ckpt_cli.cli.text import render_text
from ckpt_cli.cli.text.batches import when
from ckpt_cli.cli.text.fit import FitTable, Flow
from ckpt_cli.units import ago, human_bytes

if TYPE_CHECKING:
    from ckpt_cli.cli.output import TextRenderer


def ranges(values: Sequence[int]) -> str:
    """[1,2,3,5,7,8] -> '1-3, 5, 7-8'."""
    if not values:
        return "-"
    out: list[str] = []
    start = prev = values[0]
    for v in values[1:]:
        if v == prev + 1:
            prev = v
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        start = prev = v
    out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(out)


def headline_text(h: Headline) -> str:
    """The headline as one line of Rich markup: activity, watermark, last commit, verdict."""
    activity = "unknown"
    if h.last_activity_ms is not None and h.last_activity_age_seconds is not None:
        activity = f"{when(h.last_activity)} UTC ({ago(h.last_activity_age_seconds)})"
    facts = [f"last activity {activity}"]
    if h.files_apart and h.files_modified_age_seconds is not None:
        facts.append(f"files modified {ago(h.files_modified_age_seconds)}")
    committed = "none" if h.latest_committed is None else f"{h.latest_committed:,}"
    facts += [f"watermark {when(h.watermark)}", f"last committed {committed}"]
    facts_text = " · ".join(facts)
    if h.restartable:
        return f"{facts_text} · [bold green]restartable: yes[/]"
    if h.restartable is None:
        return f"{facts_text} · [bold yellow]restartable: not known[/]: {escape(h.unchecked)}"
    more = len(h.because) - 1
    also = f" (and {more:,} more: ckpt validate)" if more else ""
    return f"{facts_text} · [bold red]restartable: no[/], because {escape(h.because[0])}{also}"


@render_text.register(VersionsReport)
def _versions(report: VersionsReport, out: TextRenderer) -> None:
    console = out.console
    console.print(Flow(headline_text(report.headline)))
    console.print()
    b = report.batches
    s = report.settings
    files = report.files
    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="bold", no_wrap=True)
    summary.add_column()
    summary.add_row("Checkpoint", Flow.plain(report.checkpoint))
    summary.add_row("Query id", report.query_id or "[red]missing metadata file[/]")
    in_flight = ranges(b.in_flight) if b.in_flight else "none"
    summary.add_row(
        "Batches",
        f"offsets {ranges(b.offsets)} · commits {ranges(b.commits)} · "
        f"last committed {b.latest_committed if b.latest_committed is not None else 'none'}"
        f" · in flight {in_flight}",
    )
    if b.offsets_gaps or b.commits_gaps or b.commits_without_offsets:
        summary.add_row(
            "Log holes",
            f"[yellow]offsets missing {ranges(b.offsets_gaps)} · commits missing "
            f"{ranges(b.commits_gaps)} · commits without offsets "
            f"{ranges(b.commits_without_offsets)}[/]",
        )
    settings = [
        f"{s.shuffle_partitions} shuffle partitions" if s.shuffle_partitions else None,
        f"provider {s.state_store_provider}" if s.state_store_provider else None,
        f"codec {s.compression_codec}" if s.compression_codec else None,
        f"checkpoint format v{s.checkpoint_format_version}",
        f"{s.sources} source(s)" if s.sources is not None else None,
    ]
    summary.add_row("Settings", " · ".join(x for x in settings if x))
    extra = []
    if files.temp:
        extra.append(f"[yellow]{len(files.temp):,} temp files of interrupted writes[/]")
    if files.unknown:
        extra.append(f"[yellow]{len(files.unknown):,} unknown files[/]")
    summary.add_row(
        "Files",
        f"{files.count:,} files, {human_bytes(files.bytes)}"
        + (" · " + " · ".join(extra) if extra else ""),
    )
    console.print(summary)

    if not report.operators:
        console.print("\nNo state: the query has no stateful operator (or it never ran a batch).")
    for op in report.operators:
        for store in op.stores:
            title = f"Operator {op.id}"
            if op.name:
                title += f" ({op.name})"
            title += f" · store {store.name} · {store.provider}"
            rows = partition_rows(store.partitions, every=bool(out.options.get("all")))
            grouped = len(rows) < len(store.partitions)
            table = FitTable(title=title)
            if grouped:
                table.add_column("partitions")
            else:
                table.add_column("partition", justify="right")
            table.add_column("versions")
            table.add_column("count", justify="right")
            table.add_column("snapshots")
            table.add_column("files", justify="right")
            table.add_column("bytes", justify="right")
            for row in rows:
                table.add_row(*row)
            console.print()
            console.print(table)
            if grouped:
                console.print(
                    f"[dim]{len(store.partitions):,} partitions in {len(rows):,} rows: "
                    "partitions alike share one (--all: a row each)[/]"
                )
        about = _operator_details(op)
        if about:
            console.print(about)
        for line in _state_history(op):
            console.print(Flow(line, indent=2))  # metadata file paths fold after a '/'

    console.print(
        "\n[dim]Versions are state store versions: version N+1 holds the state after batch N.[/]"
    )


# From this many partitions, alike ones share a row (Spark's default is 200 partitions).
GROUP_FROM = 16
# Partitions sharing versions, snapshots and file count share a row when at least this many.
GROUP_MIN = 3


def _row(p: PartitionVersions) -> tuple[str, ...]:
    return (
        str(p.id),
        ranges(p.versions),
        f"{len(p.versions):,}",
        ranges(p.snapshot_versions),
        f"{p.files:,}",
        human_bytes(p.bytes),
    )


def partition_rows(parts: Sequence[PartitionVersions], *, every: bool) -> list[tuple[str, ...]]:
    """The rows of a store's table: one per partition, or (many partitions, not ``every``)
    one per set of alike partitions (the same versions, snapshots and number of files, and
    at most twice their median bytes: a hot partition stands out) plus one per outlier."""
    if every or len(parts) < GROUP_FROM:
        return [_row(p) for p in parts]
    groups: dict[tuple[Any, ...], list[PartitionVersions]] = {}
    for p in parts:
        groups.setdefault((tuple(p.versions), tuple(p.snapshot_versions), p.files), []).append(p)
    rows: list[tuple[int, tuple[str, ...]]] = []
    largest = max(groups.values(), key=len)
    for members in groups.values():
        median = sorted(m.bytes for m in members)[len(members) // 2]
        alike = [m for m in members if m.bytes <= 2 * median]
        if len(alike) < GROUP_MIN:
            alike = []
        grouped = {m.id for m in alike}
        rows += [(p.id, _row(p)) for p in members if p.id not in grouped]
        if not alike:
            continue
        first = alike[0]
        low, high = min(m.bytes for m in alike), max(m.bytes for m in alike)
        shown = {human_bytes(m.bytes) for m in alike}
        size = (
            f"{human_bytes(low)} each"
            if len(shown) == 1
            else f"{human_bytes(low)}-{human_bytes(high)}"
        )
        ids = ranges([m.id for m in alike])
        if members is largest and ids.count(",") >= 3:
            # The bulk, scattered between the rows listed: named by what it is not.
            ids = f"the other {len(alike):,}"
        rows.append(
            (
                first.id,
                (
                    ids,
                    ranges(first.versions),
                    f"{len(first.versions):,}",
                    ranges(first.snapshot_versions),
                    f"{first.files:,} each",
                    size,
                ),
            )
        )
    return [row for _, row in sorted(rows, key=lambda r: r[0])]


def _state_history(op: OperatorVersions) -> list[str]:
    """Which batches ran under which operator metadata, variables and schema ids, when the
    query's state changed between restarts (one line per metadata file)."""
    eras = op.state_history
    if len(eras) < 2 or all(
        (e.state_variables, e.schema_ids) == (eras[0].state_variables, eras[0].schema_ids)
        for e in eras
    ):
        return []
    lines = []
    for era in eras:
        if era.last_batch is None:
            batches = f"batch {era.first_batch}-"
        elif era.last_batch == era.first_batch:
            batches = f"batch {era.first_batch}"
        else:
            batches = f"batches {era.first_batch}-{era.last_batch}"
        ids = {name: pair[1] for store in era.schema_ids.values() for name, pair in store.items()}
        variables = ", ".join(
            f"{v.name} ({v.kind}, value schema {ids[v.name]})" if v.name in ids else v.name
            for v in era.state_variables
            if v.kind != "timer"
        )
        what = variables or "no variables"
        lines.append(f"[dim]Operator {op.id} {batches}: {era.metadata_file} · {what}[/]")
    return lines


def _operator_details(op: OperatorVersions) -> str:
    """transformWithState's state variables and time mode; a join's state format."""
    parts = []
    if op.time_mode:
        parts.append(f"time mode {op.time_mode}")
    if op.state_variables:
        parts.append(
            "state variables: "
            + ", ".join(
                f"{v.name} ({v.kind}{', TTL' if v.ttl else ''})" for v in op.state_variables
            )
        )
    if op.join_state_format is not None:
        layout = "four stores" if op.join_state_format < 3 else "column families in one store"
        parts.append(f"join state format {op.join_state_format} ({layout})")
    return f"[dim]Operator {op.id}: " + " · ".join(parts) + "[/]" if parts else ""
