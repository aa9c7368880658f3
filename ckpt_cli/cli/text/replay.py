"""``ckpt replay`` on a terminal: the first rows as a table, or what was written where."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ckpt_cli.api import ReplayRun
from ckpt_cli.cli.text import render_text

if TYPE_CHECKING:
    from ckpt_cli.cli.output import TextRenderer


@render_text.register(ReplayRun)
def _replay(run: ReplayRun, out: TextRenderer) -> None:
    if run.rows is not None:
        _table(run, out)
        return
    from ckpt_cli.cli.text.fit import Flow

    where = run.output_dir or run.output or "stdout"
    partitions = f" of {len(run.per_partition):,} partitions" if run.output_dir is not None else ""
    layout = ", one partition_id=<p>/ folder each" if run.output_dir is not None else ""
    out.console.print(
        Flow.plain(f"Wrote {run.written or 0:,} rows{partitions} to {where} ({run.format}{layout})")
    )


def _table(run: ReplayRun, out: TextRenderer) -> None:
    from rich.text import Text

    from ckpt_cli.cli.text.fit import FitTable

    rows, target, changes = run.rows or [], run.target, run.changes
    title = f"Operator {target.operator} · store {target.store} · " + (
        "changes" if changes else f"state {target.when} (version {target.version})"
    )
    table = FitTable(title=title, title_justify="left")
    if changes:
        table.add_column("batch", justify="right")
        table.add_column("change")
    table.add_column("partition", justify="right")
    key_cols = list(rows[0]["key"]) if rows and isinstance(rows[0]["key"], dict) else ["key"]
    first = rows[0].get("value", _variable_value(rows[0])) if rows else None
    value_cols = list(first) if isinstance(first, dict) else ["value"]
    for c in key_cols:
        table.add_column(c, style="bold", overflow="fold")
    for c in value_cols:
        table.add_column(c, overflow="fold")
    for row in rows:
        key, value = row["key"], row.get("value", _variable_value(row))
        cells = [_cell(key.get(c)) for c in key_cols] if isinstance(key, dict) else [_cell(key)]
        if isinstance(value, dict):
            cells += [_cell(value.get(c)) for c in value_cols]
        else:
            cells += [_cell(value)] + [""] * (len(value_cols) - 1)
        prefix = [str(row["batch_id"]), row["change_type"]] if changes else []
        # The state's values as they are: a "[x]" in them is no Rich markup.
        table.add_row(*prefix, str(row["partition_id"]), *(Text(c) for c in cells))
    out.console.print(table)
    note = f"{len(rows):,} rows"
    if run.more:
        note += " shown; more not shown (raise --limit, or use --format jsonl)"
    out.console.print(f"[dim]{note}[/]")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 120 else text[:119] + "…"


def _variable_value(row: dict[str, Any]) -> dict[str, Any]:
    # transformWithState rows: list_element, user_map_key/value, expiration_timestamp_ms...
    return {k: v for k, v in row.items() if k not in ("partition_id", "key", "batch_id")}
