"""``ckpt replay`` as one call: the rows of a store (or its change feed) read as Spark's
``statestore`` source gives them, and written where they go: a text stream (JSON lines or
CSV), a file (JSON lines, CSV or Parquet), a dataset of one folder per partition, or kept
(the first rows, for a table or ``--json``). The result says what was read and where it
went; the CLI renders it (``cli/text/replay.py``)."""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice
from typing import IO, Any

from ckpt_cli.core.model import Checkpoint
from ckpt_cli.engine import Engine, LocalEngine
from ckpt_cli.errors import CkptError
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.replay.datasets import write_dataset
from ckpt_cli.replay.sinks import open_output, write_partitions, write_state_parquet
from ckpt_cli.results import Result
from ckpt_cli.secrets import scrub
from ckpt_cli.state.decoders import require_pyarrow
from ckpt_cli.state.reader import Where, read_hints, read_state
from ckpt_cli.state.target import ReplayTarget

FORMATS = ("table", "jsonl", "csv", "parquet")
# Rows kept for a table when no limit is given.
TABLE_LIMIT = 50


@dataclass
class ReplayRun(Result):
    """What one replay read and where its rows went.

    ``rows``: the rows kept (a table's first rows, or every row up to the limit for JSON),
    ``more`` when there were more than kept; ``written``: rows written to ``output`` (a
    file, or the stream given) or to the dataset at ``output_dir`` (``per_partition``)."""

    target: ReplayTarget
    format: str
    changes: bool
    rows: list[dict[str, Any]] | None = None
    more: bool = False
    written: int | None = None
    output: str | None = None
    output_dir: str | None = None
    per_partition: dict[int, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return True

    @property
    def notes(self) -> list[str]:
        return self.target.notes

    def body_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"target": self.target.to_json(), "notes": self.notes}
        if self.output_dir is not None:
            return body | {
                "output": scrub(self.output_dir),  # a URL's user:password@ stays hidden
                "format": self.format,
                "rows": self.written,
                "rows_per_partition": {str(k): v for k, v in self.per_partition.items()},
            }
        if self.rows is not None:
            return body | {"row_count": len(self.rows), "rows": self.rows}
        return body | {
            "output": scrub(self.output) if self.output else None,
            "format": self.format,
            "rows": self.written,
        }


def run_replay(
    ckpt: Checkpoint,
    *,
    batch: int | None = None,
    state_version: int | None = None,
    operator: int | None = None,
    store: str | None = None,
    partitions: list[int] | None = None,
    change_start_batch: int | None = None,
    change_end_batch: int | None = None,
    where: Where = (),
    raw: bool = False,
    best_effort: bool = False,
    state_var: str | None = None,
    timers: bool = False,
    flatten: bool = True,
    join_side: str | None = None,
    fmt: str = "jsonl",
    output: str | None = None,
    output_dir: str | None = None,
    stream: IO[str] | None = None,
    keep: bool = False,
    limit: int | None = None,
    workers: int | None = None,
    engine: Engine | None = None,
    storage_options: Mapping[str, Any] | None = None,
    progress: ProgressSink = NULL_PROGRESS,
    on_notes: Any = None,
) -> ReplayRun:
    """Read a store's state after ``batch`` (or at ``state_version``; default: the latest
    committed) or its change feed (``change_start_batch``..``change_end_batch``), as
    :func:`ckpt_cli.state.reader.read_state` does, and write it: to the dataset at
    ``output_dir`` (a folder per partition, on ``engine``), to the file ``output``, to
    ``stream`` (JSON lines or CSV), or keep it in the result (``keep``: at most ``limit``
    rows, or ``TABLE_LIMIT`` for a table). ``on_notes(target)`` is called before any row is
    read (best-effort fallbacks, said before a long run)."""
    if fmt not in FORMATS:
        raise CkptError(f"format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if batch is not None and state_version is not None:
        raise CkptError("give batch or state_version, not both")
    changes = change_start_batch is not None
    if fmt == "parquet" and not (output or output_dir or keep):
        raise CkptError("parquet is written to a file or a dataset, not to a stream")
    # A table is for a terminal: asked for a file or a dataset, it would print and write
    # nothing. (A dataset's other formats are ``write_dataset``'s to refuse: csv was quietly
    # made jsonl here.)
    if fmt == "table" and (output is not None or output_dir is not None):
        raise CkptError(
            "a table is shown on the terminal, not written to a file: use jsonl, csv or parquet"
        )
    if fmt == "parquet":
        require_pyarrow("--format parquet")
    # A damaged file met while reading: its error says what fixes it.
    with read_hints():
        rows = read_state(
            ckpt,
            batch=batch,
            version=state_version,
            operator=operator,
            store=store,
            partitions=partitions,
            change_start_batch=change_start_batch,
            change_end_batch=change_end_batch,
            where=where,
            raw=raw,
            best_effort=best_effort,
            state_var=state_var,
            timers=timers,
            flatten=flatten,
            join_side=join_side,
        )
        target = rows.target
        if on_notes is not None:
            on_notes(target)
        run = ReplayRun(target, fmt, changes)
        if join_side is not None and rows.family is None:
            workers = 1  # worker processes decode a store's own rows, not a join side's
            if output_dir is not None:
                raise CkptError("--join-side writes one file, not a dataset (not supported yet)")
        if output_dir is not None:
            run.format = fmt
            run.output_dir = output_dir
            run.per_partition = write_dataset(
                rows,
                output_dir,
                run.format,
                engine=engine or LocalEngine(workers),
                storage_options=storage_options,
                progress=progress,
            )
            run.written = sum(run.per_partition.values())
        elif keep:
            shown = limit if limit is not None else TABLE_LIMIT if fmt == "table" else None
            got = list(islice(rows, None if shown is None else shown + 1))
            run.more = shown is not None and len(got) > shown
            run.rows = got[:shown] if shown is not None else got
        elif fmt == "parquet":
            assert output is not None
            run.output = output
            with open_output(output, binary=True) as fh, _pandas_left_out():
                run.written = write_state_parquet(rows, fh, limit, workers)
        else:
            run.output = output
            with _open_text(output, stream) as out, _pandas_left_out():
                run.written = write_partitions(
                    rows, out, fmt, limit=limit, workers=workers, progress=progress
                )
    return run


def kernel_note() -> str | None:
    """Why replay runs without the compiled kernel (None when it runs with it)."""
    from ckpt_cli.core import kernel

    return kernel.missing()


@contextmanager
def _open_text(output: str | None, stream: IO[str] | None) -> Iterator[IO[str]]:
    if output is None:
        out = stream if stream is not None else sys.stdout
        yield out
        out.flush()
        return
    with open_output(output) as fh:
        yield fh


class _NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas":
            raise ModuleNotFoundError("left out while replaying", name=name)


@contextmanager
def _pandas_left_out() -> Iterator[None]:
    """pyarrow imports pandas (~0.35 s of CPU, ~50 MB of RSS) the first time it converts a
    Python value, to look for pandas objects replay never gives it. It takes a failed
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
