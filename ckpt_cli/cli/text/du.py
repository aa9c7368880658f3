"""``ckpt du`` as tables (a terminal, a pipe or a file alike), or with ``--tsv`` as
tab-separated lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from ckpt_cli.api import DiskUsageReport, Usage
from ckpt_cli.cli.text import render_text
from ckpt_cli.cli.text.fit import FitTable, Flow
from ckpt_cli.units import human_bytes

if TYPE_CHECKING:
    from ckpt_cli.cli.output import TextRenderer


def tsv_lines(report: DiskUsageReport) -> list[str]:
    """``level<TAB>name<TAB>files<TAB>bytes`` per partition (unless summarized), store,
    operator, area and file class, then the total; exact bytes, for sort -n."""
    rows: list[tuple[str, str, Usage]] = []
    for op in report.operators:
        for store in op.stores:
            if not report.summarize:
                rows += [("partition", p.path, p.usage) for p in store.partitions]
            rows.append(("store", f"{op.path}/*/{store.name}", store.usage))
        rows.append(("operator", op.path, op.usage))
    rows += [("area", name, u) for name, u in report.by_area.items()]
    rows += [("class", name, u) for name, u in report.by_class.items()]
    rows.append(("total", ".", report.total))
    return [f"{level}\t{name}\t{u.files}\t{u.bytes}" for level, name, u in rows]


def _usage_table(title: str, first: str, groups: dict[str, Usage], total: int) -> Table:
    table = FitTable(title=title, title_justify="left", title_style="bold")
    table.add_column(first)
    for name in ("files", "bytes", "share"):
        table.add_column(name, justify="right")
    for name, u in groups.items():
        share = f"{100 * u.bytes / total:.1f}%" if total else "-"
        table.add_row(name, f"{u.files:,}", human_bytes(u.bytes), share)
    return table


@render_text.register(DiskUsageReport)
def _du(report: DiskUsageReport, out: TextRenderer) -> None:
    console = out.console
    if out.options.get("tsv"):
        # Not through Rich, which turns tabs into spaces.
        console.file.write("".join(line + "\n" for line in tsv_lines(report)))
        return
    total = report.total
    console.print(
        Flow(
            Text.assemble(
                (report.checkpoint, "bold"), f": {total.files:,} files, {human_bytes(total.bytes)}"
            )
        )
    )
    console.print()
    console.print(_usage_table("By area", "area", report.by_area, total.bytes))
    console.print()
    console.print(_usage_table("By file class", "class", report.by_class, total.bytes))
    if not report.operators:
        console.print("No state: the query has no stateful operator.")
        return
    stores = FitTable(title="By operator and store", title_justify="left", title_style="bold")
    for name, justify in (
        ("op", "right"),
        ("store", "left"),
        ("parts", "right"),
        ("files", "right"),
        ("bytes", "right"),
        ("median", "right"),
        ("max", "right"),
        ("skew", "right"),
    ):
        stores.add_column(name, justify=justify, no_wrap=name != "store")  # type: ignore[arg-type]
    for op in report.operators:
        for s in op.stores:
            skew = "-" if s.skew is None else f"{s.skew:.2f}"
            stores.add_row(
                str(op.id),
                Flow.plain(s.name),
                f"{len(s.partitions):,}",
                f"{s.usage.files:,}",
                human_bytes(s.usage.bytes),
                human_bytes(int(s.median_bytes)),
                human_bytes(s.max_bytes),
                f"[yellow]{skew}[/]" if s.skew is not None and s.skew >= 2 else skew,
            )
    console.print()
    console.print(stores)
    if report.largest and not report.summarize:
        largest = FitTable(
            title=f"Largest {len(report.largest):,} partitions",
            title_justify="left",
            title_style="bold",
        )
        largest.add_column("path")
        largest.add_column("files", justify="right")
        largest.add_column("bytes", justify="right")
        for p in report.largest:
            largest.add_row(Flow.plain(p.path), f"{p.usage.files:,}", human_bytes(p.usage.bytes))
        console.print()
        console.print(largest)
