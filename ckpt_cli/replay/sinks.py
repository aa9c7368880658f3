"""Where rows go: a text stream (stdout or a file) as JSON lines or CSV, a parquet file, or a
dataset with one ``partition_id=<p>/`` folder per state partition. Files are written through
``Storage.open_write``, so any store ckpt reads is also an output.

Partitions are independent: ``write_partitions`` and ``write_state_parquet`` replay several
side by side. Columnar ones go to threads (``ordered.in_order``), written out in partition
order as their batches come. Row-by-row ones (Python), and RocksDB stores' on local disk
(rocksdict holds the GIL), go to worker processes, each writing a temporary file (text, or
an Arrow IPC stream) read back in partition order. (``datasets.write_dataset`` writes a file
per partition instead.)
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import IO, Any, BinaryIO

import orjson

from ckpt_cli.core.model import Checkpoint
from ckpt_cli.core.rebuild import ReplayPlan
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.replay.csv_arrow import write_csv
from ckpt_cli.replay.parquet_file import ParquetFile
from ckpt_cli.state.columns import (
    at_least_one,
    columnar_for,
    line_chunks,
    line_work,
    rows_columnar,
    state_tables,
    table_work,
)
from ckpt_cli.state.decoders import arrow_tables, require_pyarrow, row_filter
from ckpt_cli.state.ordered import ahead, utf8_writer, write_in_order
from ckpt_cli.state.reader import StateRows, Where, decoder_for, iter_rows
from ckpt_cli.storage import Listing, Storage

TEXT_FORMATS = ("jsonl", "csv")


class RowWriter:
    """Writes rows as JSON lines to a text stream (CSV goes through ``csv_arrow``)."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.count = 0

    def write(self, row: dict[str, Any]) -> None:
        self.count += 1
        # orjson: the JSON encoding is most of the time of a large replay.
        self.out.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE).decode())


def write_text(rows: Iterable[dict[str, Any]], out: IO[str], limit: int | None = None) -> int:
    """Rows as JSON lines into ``out``; returns how many."""
    writer = RowWriter(out)
    for row in itertools.islice(rows, limit):
        writer.write(row)
    return writer.count


def write_parquet(rows: Iterable[dict[str, Any]], out: BinaryIO, schema: Any = None) -> int:
    """Rows as one parquet file (of ``schema``, else the first ``arrow_tables`` batch's);
    returns how many."""
    require_pyarrow("parquet output")
    return write_tables(arrow_tables(rows, schema), out)


def write_state_parquet(
    rows: StateRows, out: BinaryIO, limit: int | None = None, workers: int | None = None
) -> int:
    """``rows`` as one parquet file: the table ``rows.to_arrow()`` gives, a batch at a time
    (partitions decoded by up to ``workers`` threads, default one per core, and row groups
    encoded by as many; RocksDB stores' on local disk in as many worker processes)."""
    require_pyarrow("parquet output")
    workers = workers or os.cpu_count() or 1
    if _side_by_side(rows, workers, limit) and _processes(rows, columnar=True):
        columnar = rows_columnar(rows)
        if columnar is not None:
            tables = at_least_one(_tables_in_processes(rows, workers), columnar)
            return write_tables(tables, out, encoders=workers)
    if _side_by_side(rows, workers, limit):
        # One encoder thread per worker (pyarrow, mostly without the GIL: ``parquet_file``)
        # while the others decode. The compiled kernel decodes without the GIL, so as many
        # threads as cores do (10M keys from a snapshot: 3.2 -> 2.2 s); numpy's calls hold
        # it between them, and with all threads decoding two used 30% more CPU than one and
        # saved no time (NOTES: "Replay on 200 partitions"), so without the kernel one
        # thread fewer does.
        columnar = rows_columnar(rows)
        compiled = columnar is not None and columnar.kernel is not None
        decoders = workers if compiled else max(1, workers - 1)
        source = functools.partial(state_tables, rows, limit, decoders)
        return write_tables(ahead(source), out, encoders=workers)
    return write_tables(state_tables(rows, limit, workers), out)


# A row group gathers tables up to these sizes. Written a small table at a time (one row group
# each), the writer tried a dictionary for every column of every 16k rows, and for distinct
# strings that cost more than the encoding itself (NOTES: "Parquet row groups").
ROW_GROUP_ROWS = 1 << 17
ROW_GROUP_BYTES = 32 << 20
# A column of distinct values gives up its dictionary at this size, and one of few values
# still keeps it.
DICTIONARY_PAGE_BYTES = 1 << 16


def write_tables(tables: Iterable[Any], out: BinaryIO, encoders: int = 1) -> int:
    """Arrow tables of one schema as one parquet file, gathered into row groups of up to
    ``ROW_GROUP_ROWS`` rows or ``ROW_GROUP_BYTES``, encoded by ``encoders`` threads (the
    same bytes from any number: ``parquet_file``); returns how many rows."""
    import pyarrow as pa

    count = 0
    writer: Any = None
    pending: list[Any] = []
    rows = size = 0
    finished = False

    def flush() -> None:
        nonlocal rows, size
        if pending:
            writer.write_table(pa.concat_tables(pending), row_group_size=rows or None)
            pending.clear()
            rows = size = 0

    try:
        for table in tables:
            if writer is None:
                import pyarrow.parquet as pq  # here: tables made ahead overlap its import

                options = {"dictionary_pagesize_limit": DICTIONARY_PAGE_BYTES}
                if encoders > 1:
                    writer = ParquetFile(out, table.schema, encoders, **options)
                else:
                    writer = pq.ParquetWriter(out, table.schema, **options)
            if not table.schema.equals(writer.schema):
                flush()
                writer.write_table(table)  # the writer's own error for another schema
                count += table.num_rows
                continue
            pending.append(table)
            rows += table.num_rows
            size += table.nbytes
            count += table.num_rows
            if rows >= ROW_GROUP_ROWS or size >= ROW_GROUP_BYTES:
                flush()
        flush()
        finished = True
    finally:
        if isinstance(writer, ParquetFile) and not finished:
            writer.abandon()  # the encoders stop; the file is incomplete, as the error says
        elif writer is not None:
            writer.close()
    return count


@contextlib.contextmanager
def open_output(
    location: str, storage_options: Mapping[str, Any] | None = None, *, binary: bool = False
) -> Iterator[Any]:
    """A file to write at a path or URL: binary, or UTF-8 text (newlines as written)."""
    if "://" in location:
        parent, _, name = location.rpartition("/")
    else:
        parent, name = os.path.split(os.path.abspath(location))
    storage = Storage.from_url(parent, storage_options)
    with storage.open_write(name) as fh:
        if binary:
            yield fh
            return
        text = io.TextIOWrapper(fh, encoding="utf-8", newline="")
        yield text
        text.flush()
        text.detach()  # the binary file is closed by open_write


# -- partitions in worker processes, into one stream ------------------------------------------


@dataclass(frozen=True)
class _PartitionJob:
    plan: ReplayPlan
    raw: bool
    where: Where
    out_path: str


_WORKER_CHECKPOINT: Checkpoint | None = None


def _init_worker(storage: Storage, listing: Listing) -> None:
    # Each worker builds the model once from the parent's listing: no new listing calls.
    global _WORKER_CHECKPOINT
    _WORKER_CHECKPOINT = Checkpoint(storage, listing)


def _write_partition(job: _PartitionJob) -> tuple[str, int]:
    """In a worker process: replay one partition into the local file ``job.out_path``."""
    ckpt = _WORKER_CHECKPOINT
    assert ckpt is not None
    decoder = decoder_for(ckpt, job.plan.operator, job.plan.store, raw=job.raw)
    matches = row_filter(job.where, decoder.schema)
    if matches is None:
        count = 0
        with open(job.out_path, "wb") as binary:
            for text, rows in line_chunks(ckpt, job.plan, decoder):
                binary.write(text)
                count += rows
        return job.out_path, count
    with open(job.out_path, "w", encoding="utf-8", newline="") as fh:
        writer = RowWriter(fh)
        for row in iter_rows(ckpt, job.plan, decoder, matches):
            writer.write(row)
    return job.out_path, writer.count


def write_partitions(
    rows: StateRows,
    out: IO[str],
    fmt: str,
    *,
    limit: int | None = None,
    workers: int | None = None,
    progress: ProgressSink = NULL_PROGRESS,
) -> int:
    """The rows as JSON lines or CSV into ``out``, partition after partition; returns how
    many. Several partitions of columnar state go to threads (on any storage); on local
    storage, those of RocksDB stores and of state read row by row to worker processes."""
    if fmt == "csv":
        return write_csv(rows, out, limit=limit, workers=workers, progress=progress)
    if rows.changes is not None or rows.state_var is not None:
        return write_text(rows, out, limit)
    ckpt, plans, decoder = rows.ckpt, rows.plans, rows.decoder
    workers = workers or os.cpu_count() or 1
    progress.start("Replaying partitions", total=len(plans))
    try:
        parallel = _side_by_side(rows, workers, limit)
        columnar = rows_columnar(rows) is not None
        if parallel and _processes(rows, columnar):
            return _write_parallel(rows, out, workers, progress)
        if parallel and columnar:
            return _write_threads(rows, out, workers, progress)  # any storage
        if rows.matches is None:
            count = 0
            write = utf8_writer(out)
            for plan in plans:
                left = None if limit is None else limit - count
                for text, n in line_chunks(ckpt, plan, decoder, left):
                    write(text)
                    count += n
                if limit is not None and count >= limit:
                    return count
                progress.advance()
            return count
        writer = RowWriter(out)
        for plan in plans:
            for row in iter_rows(ckpt, plan, decoder, rows.matches):
                if limit is not None and writer.count >= limit:
                    return writer.count
                writer.write(row)
            progress.advance()
        return writer.count
    finally:
        progress.close()


def _side_by_side(rows: StateRows, workers: int, limit: int | None) -> bool:
    """Whether partitions replay side by side: several of them and several workers, and no
    limit (rows decoded ahead would mostly be cut)."""
    return len(rows.plans) > 1 and workers > 1 and limit is None


def _processes(rows: StateRows, columnar: bool) -> bool:
    """Whether worker processes take the partitions. They read the files themselves (local
    storage only), and take the partitions read row by row, and RocksDB's when replay runs
    without the compiled kernel: SSTs decoded by numpy, or rocksdict's Python object per key
    and value, hold the GIL, so threads hardly overlap (processes: 25-40% less wall time,
    about 100 MB more RSS; NOTES). The kernel reads SST blocks and merges without the GIL:
    threads then take them (1M keys: 1.3-1.7 -> 0.9-1.0 s to JSON lines, no worker's
    imports)."""
    from ckpt_cli.core import kernel

    rocksdb = all(plan.provider == "rocksdb" for plan in rows.plans) and kernel.load() is None
    return rows.ckpt.storage.is_local and (not columnar or rocksdb)


def _write_parallel(rows: StateRows, out: IO[str], workers: int, progress: ProgressSink) -> int:
    total = 0
    for path, count in _in_processes(rows, workers, _write_partition):
        _append_file(path, out)
        total += count
        progress.advance()
    return total


def _in_processes(
    rows: StateRows, workers: int, write: Callable[[_PartitionJob], tuple[str, int]]
) -> Iterator[tuple[str, int]]:
    """Each partition written by ``write`` in a worker process into a temporary file:
    ``(path, rows)`` in partition order, the file deleted once the caller has read it."""
    with tempfile.TemporaryDirectory(prefix="ckpt-replay-") as tmp:
        jobs = [
            _PartitionJob(plan, rows.raw, rows.where, f"{tmp}/{plan.partition}")
            for plan in rows.plans
        ]
        with _pool(rows, min(workers, len(jobs))) as pool:
            for path, count in pool.map(write, jobs):
                yield path, count
                os.unlink(path)


def _write_threads(rows: StateRows, out: IO[str], workers: int, progress: ProgressSink) -> int:
    """JSON lines of columnar partitions replayed side by side in threads (numpy and pyarrow
    release the GIL), written in partition order as they come: no temporary files."""
    sources = [functools.partial(line_work, rows.ckpt, plan, rows.decoder) for plan in rows.plans]
    return write_in_order(sources, out, workers, progress)


def _tables_in_processes(rows: StateRows, workers: int) -> Iterator[Any]:
    """The tables of RocksDB stores' partitions, each made in a worker process (rocksdict
    holds the GIL, as for JSON lines) into a local Arrow IPC stream, read back in partition
    order a batch at a time."""
    import pyarrow as pa

    for path, _ in _in_processes(rows, workers, _write_partition_tables):
        with pa.OSFile(path) as fh:
            for batch in pa.ipc.open_stream(fh):
                yield pa.Table.from_batches([batch])


def _write_partition_tables(job: _PartitionJob) -> tuple[str, int]:
    """In a worker process: one partition's tables into the Arrow IPC stream
    ``job.out_path``."""
    import pyarrow as pa

    ckpt = _WORKER_CHECKPOINT
    assert ckpt is not None
    decoder = decoder_for(ckpt, job.plan.operator, job.plan.store, raw=job.raw)
    columnar = columnar_for(decoder)
    assert columnar is not None  # the parent's decoder of the same store is
    count = 0
    with pa.OSFile(job.out_path, "wb") as fh, pa.ipc.new_stream(fh, columnar.arrow_schema) as out:
        for work in table_work(ckpt, job.plan, columnar):
            table = work()
            out.write_table(table)
            count += table.num_rows
    return job.out_path, count


def _append_file(path: str, out: IO[str]) -> None:
    """The UTF-8 text of the local file ``path`` onto ``out``: as bytes onto the binary
    stream under ``out`` when there is one (no decoding and encoding again)."""
    binary = getattr(out, "buffer", None)
    if binary is not None:
        out.flush()
        with open(path, "rb") as fh:
            shutil.copyfileobj(fh, binary, 1 << 20)
        return
    with open(path, encoding="utf-8", newline="") as fh:
        while chunk := fh.read(1 << 20):
            out.write(chunk)


@contextlib.contextmanager
def _pool(rows: StateRows, workers: int) -> Iterator[Executor]:
    """Worker processes for partitions replayed row by row and for RocksDB stores' JSON lines
    and tables (one interpreter, so one GIL, each; HDFS stores' columnar partitions share one
    in threads, ``ordered.in_order``)."""
    from concurrent.futures import ProcessPoolExecutor  # multiprocessing: only here

    with ProcessPoolExecutor(
        max_workers=workers,
        initializer=_init_worker,
        initargs=(rows.ckpt.storage, rows.ckpt.listing),
    ) as processes:
        yield processes
