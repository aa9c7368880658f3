"""``ckpt replay``."""

from __future__ import annotations

import importlib.abc
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from itertools import islice
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any

import typer

from ckpt_cli.cli.common import (
    STATE,
    EngineOpt,
    JsonOpt,
    MasterOpt,
    PathArg,
    QuietOpt,
    Session,
    StorageOpt,
    check_output_file,
    error_boundary,
    start,
    stderr_console,
    stdout_console,
    write_json,
)
from ckpt_cli.engine import make_engine
from ckpt_cli.errors import CkptError, UsageError
from ckpt_cli.replay import StateRows
from ckpt_cli.replay.datasets import DATASET_FORMATS, write_dataset
from ckpt_cli.replay.rows import require_pyarrow
from ckpt_cli.replay.sinks import open_output, write_partitions, write_state_parquet
from ckpt_cli.replay.source import read_hints, requested_store, target_rows
from ckpt_cli.replay.target import ReplayTarget, SelectionError, resolve_target
from ckpt_cli.secrets import scrub

if TYPE_CHECKING:  # rich only for a table on the terminal, not for rows written to a file
    from rich.console import Console

TABLE_LIMIT = 50


class OutputFormat(str, Enum):
    table = "table"
    jsonl = "jsonl"
    csv = "csv"
    parquet = "parquet"


@error_boundary
def replay(
    path: PathArg,
    batch: Annotated[
        int | None,
        typer.Option(
            "--batch",
            "-b",
            metavar="N",
            help="The state after this batch committed (Spark's batchId; default: the latest "
            "committed batch).",
            show_default=False,
        ),
    ] = None,
    state_version: Annotated[
        int | None,
        typer.Option(
            "--state-version",
            metavar="V",
            help="A state store version instead of --batch (version V is the state after batch "
            "V-1).",
            show_default=False,
        ),
    ] = None,
    operator: Annotated[
        int | None,
        typer.Option(
            "--operator",
            metavar="ID",
            help="Operator id (needed when there are several).",
            show_default=False,
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            metavar="NAME",
            help="Store name, for joins: left-keyToNumValues, left-keyWithIndexToValue, "
            "right-keyToNumValues, right-keyWithIndexToValue.",
            show_default=False,
        ),
    ] = None,
    join_side: Annotated[
        str | None,
        typer.Option(
            "--join-side",
            metavar="left|right",
            help="A stream-stream join's side, left or right: its input rows by join key, "
            "like Spark's joinSide option.",
            show_default=False,
        ),
    ] = None,
    partition: Annotated[
        list[int] | None,
        typer.Option(
            "--partition",
            "-p",
            metavar="N",
            help="Only this partition (repeatable; default all).",
            show_default=False,
        ),
    ] = None,
    where: Annotated[
        list[str] | None,
        typer.Option(
            "--where",
            "-w",
            metavar="COLUMN=VALUE",
            help="Only keys whose column equals VALUE: COLUMN=VALUE (repeatable, all must hold).",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            "-n",
            min=0,
            help=f"At most this many rows (table: {TABLE_LIMIT}).",
            show_default=False,
        ),
    ] = None,
    fmt: Annotated[
        OutputFormat,
        typer.Option(
            "--format",
            "-f",
            help="Output format (parquet needs pyarrow and -o FILE or -O DIR).",
        ),
    ] = OutputFormat.table,
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Write the rows to this file (a local path or a URL) instead of stdout.",
            show_default=False,
        ),
    ] = None,
    output_dir: Annotated[
        str | None,
        typer.Option(
            "--output-dir",
            "-O",
            metavar="DIR",
            help="Write the rows as a dataset to this directory (a local path or a URL): one "
            "partition_id=<p>/ folder per state partition, jsonl or parquet files (needed with "
            "--engine spark).",
            show_default=False,
        ),
    ] = None,
    raw: Annotated[
        bool, typer.Option("--raw", help="Keys and values as hex, without decoding.")
    ] = False,
    changes: Annotated[
        bool,
        typer.Option(
            "--changes", help="The change feed between --from and --to instead of the state."
        ),
    ] = False,
    from_batch: Annotated[
        int | None,
        typer.Option(
            "--from", metavar="BATCH", help="First batch of --changes.", show_default=False
        ),
    ] = None,
    to_batch: Annotated[
        int | None,
        typer.Option(
            "--to",
            metavar="BATCH",
            help="Last batch of --changes (default: latest committed).",
            show_default=False,
        ),
    ] = None,
    best_effort: Annotated[
        bool,
        typer.Option(
            "--best-effort",
            help="When a partition's version cannot be loaded, replay its newest loadable one "
            "and say so; with --changes, when the changelog lineage is broken, read the "
            "changelogs the commit log names and say so.",
        ),
    ] = False,
    state_var: Annotated[
        str | None,
        typer.Option(
            "--state-var",
            metavar="NAME",
            help="transformWithState: the state variable to read (Spark's stateVarName), "
            "e.g. ckpt replay CKPT --state-var events.",
            show_default=False,
        ),
    ] = None,
    timers: Annotated[
        bool,
        typer.Option(
            "--timers",
            help="transformWithState: the registered timers (Spark's readRegisteredTimers).",
        ),
    ] = False,
    flatten: Annotated[
        bool,
        typer.Option(
            "--flatten/--no-flatten",
            help="transformWithState list/map variables: a row per element (default) or one "
            "row per key with the whole collection (Spark's flattenCollectionTypes=false).",
        ),
    ] = True,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            help="Partitions replayed at once, in threads or worker processes (default: cores).",
            show_default=False,
        ),
    ] = None,
    engine: EngineOpt = "local",
    master: MasterOpt = None,
    json_output: JsonOpt = False,
    quiet: QuietOpt = False,
    storage_option: StorageOpt = None,
) -> None:
    """Show the state of a store at a batch, decoded, like Spark's statestore source.

    The state after batch N is store version N+1: the newest snapshot (HDFS-backed store) or
    zip (RocksDB) at or below it, then the deltas or changelogs after it; in checkpoint
    format v2 the files are the ones the commit log's uniqueIds and the changelog lineage
    name. Rows are {"partition_id", "key": {...}, "value": {...}} with the column names of
    the state schema (hex with --raw or without a schema).

    With --changes, the rows are the change feed of batches --from..--to: each put
    ("update"), delete and merge, with the batch it happened in.

    A transformWithState operator holds several state variables: name one with --state-var
    (ckpt replay CKPT --state-var events --no-flatten) or read --timers.

    Examples:

      ckpt replay /data/ckpt/q1 --operator 0 --limit 20

      ckpt replay /data/ckpt/q1 --batch 41 --format jsonl -o state.jsonl

      ckpt replay /data/ckpt/q1 --changes --from 40 --to 42

      ckpt replay /data/ckpt/q1 --format parquet -O out/
    """
    run = start(json_output, quiet, storage_option)
    _check_outputs(output, output_dir, engine, changes)
    if batch is not None and state_version is not None:
        raise UsageError("give --batch or --state-version, not both")
    if changes and from_batch is None:
        raise CkptError("--changes needs --from BATCH")
    if fmt is OutputFormat.parquet and output is None and output_dir is None:
        raise UsageError("--format parquet needs -o/--output FILE or -O/--output-dir DIR")
    if fmt is OutputFormat.parquet:
        require_pyarrow("--format parquet")
    pairs = _parse_where(where)
    ckpt = run.open(path)
    # A damaged file met while reading: its error says what fixes it.
    with read_hints():
        with _in_option_names():
            store, family = requested_store(ckpt, operator, store, join_side)
            target = resolve_target(
                ckpt,
                batch=batch,
                version=state_version,
                operator=operator,
                store=store,
                partitions=partition,
            )
            rows = target_rows(
                ckpt,
                target,
                change_start_batch=from_batch if changes else None,
                change_end_batch=to_batch if changes else None,
                where=pairs,
                raw=raw,
                best_effort=best_effort,
                state_var=state_var,
                timers=timers,
                flatten=flatten,
                join_side=join_side is not None,
                join_family=family,
            )
        _print_notes(target)
        if join_side is not None and rows.family is None:
            workers = 1  # worker processes decode a store's own rows, not a join side's
            if output_dir is not None:
                raise CkptError("--join-side writes one file, not a dataset (not supported yet)")
        if output_dir is not None:
            _write_dataset(rows, output_dir, fmt, engine, workers, master, run, json_output)
        elif json_output:
            got = list(islice(rows, limit))
            write_json(
                {
                    "status": "ok",
                    "target": target.to_json(),
                    "notes": target.notes,
                    "row_count": len(got),
                    "rows": got,
                }
            )
        elif fmt is OutputFormat.parquet:
            assert output is not None
            with open_output(output, binary=True) as fh, _pandas_left_out():
                write_state_parquet(rows, fh, limit, workers)
        elif fmt is OutputFormat.table:
            shown = limit if limit is not None else TABLE_LIMIT
            got = list(islice(rows, shown + 1))
            render_table(
                got[:shown], stdout_console(), target, more=len(got) > shown, changes=changes
            )
        else:
            with _open_text(output) as out, _pandas_left_out():
                write_partitions(
                    rows, out, fmt.value, limit=limit, workers=workers, progress=run.progress
                )


# The CLI's options for the library's arguments, in library errors.
OPTION_NAMES = {
    "operator": "--operator",
    "store": "--store",
    "join_side": "--join-side",
    "where": "--where",
    "change_start_batch": "--from",
    "change_end_batch": "--to",
    "raw": "--raw",
}


class _NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas":
            raise ModuleNotFoundError("left out while replaying", name=name)


@contextmanager
def _pandas_left_out() -> Iterator[None]:
    """pyarrow imports pandas (~0.35 s of CPU, ~50 MB of RSS) the first time it converts a
    Python value, to look for pandas objects the CLI never gives it. It takes a failed
    import as "no pandas" until a pandas conversion (``to_pandas``) tries again."""
    if "pandas" in sys.modules:
        yield
        return
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


@contextmanager
def _in_option_names() -> Iterator[None]:
    try:
        yield
    except SelectionError as exc:
        raise exc.naming(OPTION_NAMES) from exc


def _parse_where(where: list[str] | None) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in where or ():
        column, sep, value = item.partition("=")
        if not sep:
            raise CkptError(f"--where {item!r}: expected COLUMN=VALUE")
        pairs.append((column, value))
    return tuple(pairs)


_FILE_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")


def _check_outputs(output: str | None, output_dir: str | None, engine: str, changes: bool) -> None:
    """-o is a file, -O a dataset directory; their old spellings (``--output DIR/``, ``-O``
    for a file) get a did-you-mean."""
    check_output_file(output)
    if output is not None and output_dir is not None:
        raise UsageError("give -o/--output FILE or -O/--output-dir DIR, not both")
    if output is not None and (output.endswith("/") or Path(output).is_dir()):
        raise UsageError(
            f"--output {output}: a directory; did you mean -O/--output-dir {output} (a dataset "
            "with one folder per partition)"
        )
    if (
        output_dir is not None
        and not output_dir.endswith("/")
        and output_dir.endswith(_FILE_SUFFIXES)
        and not Path(output_dir).is_dir()
    ):
        raise UsageError(
            f"-O {output_dir}: -O is the output directory of a dataset; did you mean "
            f"-o/--output {output_dir} (one file)? (a directory of that name: -O {output_dir}/)"
        )
    if changes and output_dir is not None:
        raise UsageError("--changes writes one file or stdout, not a dataset: use -o FILE")
    if engine != "local" and output_dir is None and not changes:
        raise UsageError("--engine spark writes a dataset: give -O/--output-dir DIR")


def _write_dataset(
    rows: StateRows,
    output: str,
    fmt: OutputFormat,
    engine: str,
    workers: int | None,
    master: str | None,
    run: Session,
    json_output: bool,
) -> None:
    fmt_name = fmt.value if fmt.value in DATASET_FORMATS else "jsonl"
    counts = write_dataset(
        rows,
        output,
        fmt_name,
        engine=make_engine(engine, workers=workers, master=master),
        storage_options=run.storage_options,
        progress=run.progress,
    )
    summary = {
        "status": "ok",
        "target": rows.target.to_json(),
        "notes": rows.notes,
        "output": scrub(output),  # a URL's user:password@ stays hidden
        "format": fmt_name,
        "rows": sum(counts.values()),
        "rows_per_partition": {str(k): v for k, v in counts.items()},
    }
    if json_output:
        write_json(summary)
    else:
        from ckpt_cli.cli.text.fit import Flow

        stdout_console().print(
            Flow.plain(
                f"Wrote {summary['rows']:,} rows of {len(counts):,} partitions to "
                f"{summary['output']} ({fmt_name}, one partition_id=<p>/ folder each)"
            )
        )


@contextmanager
def _open_text(output: str | None) -> Iterator[IO[str]]:
    if output is None:
        yield sys.stdout
        sys.stdout.flush()
        return
    with open_output(output) as fh:
        yield fh


def _print_notes(target: ReplayTarget) -> None:
    if not target.notes or STATE.quiet:
        return  # rich is not imported for rows written to a file
    from rich.text import Text

    for note in target.notes:  # one line each, as errors and warnings on stderr
        stderr_console().print(Text.assemble(("note:", "yellow"), " ", note), soft_wrap=True)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 120 else text[:119] + "…"


def _variable_value(row: dict[str, Any]) -> dict[str, Any]:
    # transformWithState rows: list_element, user_map_key/value, expiration_timestamp_ms...
    return {k: v for k, v in row.items() if k not in ("partition_id", "key", "batch_id")}


def render_table(
    rows: list[dict[str, Any]], console: Console, target: ReplayTarget, *, more: bool, changes: bool
) -> None:
    from rich.text import Text

    from ckpt_cli.cli.text.fit import FitTable

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
    console.print(table)
    note = f"{len(rows):,} rows"
    if more:
        note += " shown; more not shown (raise --limit, or use --format jsonl)"
    console.print(f"[dim]{note}[/]")
