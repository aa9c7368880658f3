"""``ckpt replay``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path, PurePosixPath
from typing import Annotated

import typer

from ckpt_cli.api import (
    TABLE_LIMIT,
    ReplayRun,
    ReplayTarget,
    SelectionError,
    kernel_note,
    run_replay,
)
from ckpt_cli.cli.common import (
    STATE,
    EngineOpt,
    MasterOpt,
    PathArg,
    SharedOptions,
    check_output_file,
    error_boundary,
    operator_option,
    output_option,
    partition_option,
    start,
    state_var_option,
    stderr_console,
    workers_option,
)
from ckpt_cli.engine import make_engine
from ckpt_cli.errors import CkptError, UsageError


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
        int | None, operator_option("Operator id (needed when there are several).")
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            metavar="NAME",
            help="Store name, for stream-stream joins: <side>-keyToNumValues and "
            "<side>-keyWithIndexToValue (state formats 1-3), <side>-keyWithTsToValues and "
            "<side>-tsWithKey (format 4), where <side> is left or right.",
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
        list[int] | None, partition_option("Only this partition (repeatable; default all).")
    ] = None,
    where: Annotated[
        list[str] | None,
        typer.Option(
            "--where",
            "-w",
            metavar="EXPR",
            help="Only rows that match: comparisons of key.* and value.* columns (=, !=, <, "
            '<=, >, >=, in (...), is null) joined by and / or, e.g. "value.count > 5"; '
            "COLUMN=VALUE compares a key column as text (repeatable, all must hold).",
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
        OutputFormat | None,
        typer.Option(
            "--format",
            "-f",
            help="Output format (parquet needs pyarrow and -o FILE or -O DIR). Default: "
            "a table, or what -o FILE's name ends in (.jsonl, .csv, .parquet; else jsonl), "
            "or jsonl files for -O DIR.",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        str | None,
        output_option(
            "Write the rows to this file (a local path or a URL; - is stdout).",
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
        state_var_option(
            "transformWithState: the state variable to read (Spark's stateVarName), "
            "e.g. ckpt replay CKPT --state-var events."
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
        workers_option(
            "Partitions replayed at once, in threads or worker processes (default: cores)."
        ),
    ] = None,
    engine: EngineOpt = "local",
    master: MasterOpt = None,
    shared: SharedOptions = SharedOptions(),
) -> ReplayRun:
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

      ckpt replay /data/ckpt/q1 --batch 41 -o state.parquet

      ckpt replay /data/ckpt/q1 --changes --from 40 --to 42

      ckpt replay /data/ckpt/q1 --format parquet -O out/
    """
    run = start(shared)
    if STATE.debug and (why := kernel_note()) is not None:
        typer.echo(f"note: {why}; replay uses numpy/Arrow (slower)", err=True)
    _check_outputs(output, output_dir, engine, changes)
    fmt = _output_format(fmt, output, output_dir)
    if output == "-":
        output = None  # stdout, as for most tools (a file named "-": -o ./-)
    if batch is not None and state_version is not None:
        raise UsageError("give --batch or --state-version, not both")
    if changes and from_batch is None:
        raise CkptError("--changes needs --from BATCH")
    if fmt is OutputFormat.parquet and output is None and output_dir is None:
        raise UsageError("--format parquet needs -o/--output FILE or -O/--output-dir DIR")
    with _in_option_names():
        result = run_replay(
            run.open(path),
            batch=batch,
            state_version=state_version,
            operator=operator,
            store=store,
            partitions=partition,
            change_start_batch=from_batch if changes else None,
            change_end_batch=to_batch if changes else None,
            where=_parse_where(where),
            raw=raw,
            best_effort=best_effort,
            state_var=state_var,
            timers=timers,
            flatten=flatten,
            join_side=join_side,
            fmt=fmt.value,
            output=output,
            output_dir=output_dir,
            # --json shows the rows only when they go nowhere else
            keep=fmt is OutputFormat.table
            or (shared.json_output and output is None and output_dir is None),
            limit=limit,
            workers=workers,
            engine=make_engine(engine, workers=workers, master=master) if output_dir else None,
            storage_options=run.storage_options,
            progress=run.progress,
            on_notes=_print_notes,
        )
    # Rows written to stdout or a file are the output; what else there is to say is rendered
    # (with --json, what was written where, as for a dataset).
    wrote_file = output is not None and shared.json_output
    return run.render(result) if result.written is None or output_dir or wrote_file else result


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


@contextmanager
def _in_option_names() -> Iterator[None]:
    try:
        yield
    except SelectionError as exc:
        raise exc.naming(OPTION_NAMES) from exc


# COLUMN=VALUE, ckpt's first --where: a key column equal to unquoted text.
_PAIR = re.compile(r"([A-Za-z_$][\w$.]*)=([^'\s=<>!(),]*)")


def _parse_where(where: list[str] | None) -> tuple[tuple[str, str] | str, ...]:
    """Each ``--where``: an expression of the ``state delete`` language, or a pair."""
    conditions: list[tuple[str, str] | str] = []
    for item in where or ():
        pair = _PAIR.fullmatch(item.strip())
        conditions.append((pair[1], pair[2]) if pair else item)
    return tuple(conditions)


_FILE_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")
_SUFFIX_FORMATS = {
    ".jsonl": OutputFormat.jsonl,
    ".ndjson": OutputFormat.jsonl,
    ".json": OutputFormat.jsonl,
    ".csv": OutputFormat.csv,
    ".parquet": OutputFormat.parquet,
    ".pq": OutputFormat.parquet,
}


def _output_format(
    fmt: OutputFormat | None, output: str | None, output_dir: str | None
) -> OutputFormat:
    """--format, or the one -o/-O imply: rows asked for in a file are never a table printed
    instead."""
    if fmt is OutputFormat.table and (output is not None or output_dir is not None):
        flag = "-o" if output is not None else "-O"
        raise UsageError(
            f"--format table is for the terminal, not {flag}: use jsonl, csv or parquet"
        )
    if fmt is OutputFormat.csv and output_dir is not None:
        raise UsageError("-O/--output-dir writes jsonl or parquet files, not csv: use -o FILE")
    if fmt is not None:
        return fmt
    if output is not None:
        return _SUFFIX_FORMATS.get(PurePosixPath(output).suffix.lower(), OutputFormat.jsonl)
    return OutputFormat.jsonl if output_dir is not None else OutputFormat.table


def _check_outputs(output: str | None, output_dir: str | None, engine: str, changes: bool) -> None:
    """-o is a file, -O a dataset directory; their old spellings (``--output DIR/``, ``-O``
    for a file) get a did-you-mean."""
    check_output_file(output, stdout=True)
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


def _print_notes(target: ReplayTarget) -> None:
    if not target.notes or STATE.quiet:
        return  # rich is not imported for rows written to a file
    from rich.text import Text

    for note in target.notes:  # one line each, as errors and warnings on stderr
        stderr_console().print(Text.assemble(("note:", "yellow"), " ", note), soft_wrap=True)
