"""``ckpt replay``: the state of a store at a batch (or the changes between two batches),
decoded with its schema, in the row shape of Spark's ``statestore`` source.

Rows stream: the base snapshot/zip of each partition is read row by row and merged with the
changes after it (``state.iter_state``), so memory follows the size of those changes, not of
the state. Partitions are independent; ``write_partitions`` replays them in parallel worker
processes, each writing its rows to a temporary file that is then copied out in order.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import IO, Any

import orjson

from ckpt_cli.engine import Engine
from ckpt_cli.errors import CkptError, MissingExtraError
from ckpt_cli.jsonrows import LineEncoder
from ckpt_cli.model import Checkpoint, CheckpointFile, FileKind
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.state import (
    ReplayPlan,
    RowDecoder,
    StateUnavailable,
    change_file,
    change_files,
    iter_file_records,
    iter_state,
    json_value,
    plan_version,
    store_schema,
)
from ckpt_cli.storage import (
    FileEntry,
    Listing,
    Storage,
    classify_store_error,
    fsspec_options,
    redact_url,
    store_error,
)

FORMATS = ("table", "jsonl", "csv", "parquet")


@dataclass
class ReplayTarget:
    """What to replay: one operator's store, some partitions, at one version."""

    operator: int
    store: str
    partitions: list[int]
    version: int
    notes: list[str] = field(default_factory=list)

    @property
    def batch(self) -> int:
        return self.version - 1


def resolve_target(
    ckpt: Checkpoint,
    *,
    batch: int | None = None,
    version: int | None = None,
    operator: int | None = None,
    store: str | None = None,
    partitions: Iterable[int] | None = None,
) -> ReplayTarget:
    """Fill in defaults and check the choices against the checkpoint; CkptError if invalid."""
    if not ckpt.operators:
        raise CkptError(f"{ckpt.storage.url}: the query has no state (no state/ directory)")
    if operator is None:
        if len(ckpt.operators) > 1:
            raise CkptError(
                f"{ckpt.storage.url}: the query has several stateful operators; choose one with "
                f"--operator ({', '.join(str(o) for o in ckpt.operators)})"
            )
        operator = next(iter(ckpt.operators))
    op = ckpt.operators.get(operator)
    if op is None:
        raise CkptError(
            f"{ckpt.storage.url}: operator {operator} has no state "
            f"(operators: {', '.join(str(o) for o in ckpt.operators)})"
        )
    if store is None:
        if len(op.stores) > 1:
            raise CkptError(
                f"{op.path}: operator {operator} has several state stores; choose one with "
                f"--store ({', '.join(op.stores)})"
            )
        store = next(iter(op.stores))
    if store not in op.stores:
        raise CkptError(f"{op.path}: no store {store!r} (stores: {', '.join(op.stores)})")
    known = sorted(op.stores[store].partitions)
    chosen = sorted(set(partitions)) if partitions else known
    unknown = [p for p in chosen if p not in op.stores[store].partitions]
    if unknown:
        raise CkptError(
            f"{op.path}: no partition {', '.join(map(str, unknown))} "
            f"(partitions {known[0]}-{known[-1]})"
        )
    latest = ckpt.batches.latest_committed
    if version is None:
        if batch is None:
            if latest is None:
                raise CkptError(f"{ckpt.storage.url}: no committed batch to replay")
            batch = latest
        elif latest is not None and batch > latest:
            raise CkptError(
                f"{ckpt.storage.url}: batch {batch} is not committed (latest committed: {latest})"
            )
        elif batch < 0:
            raise CkptError(f"batch {batch} is negative")
        version = batch + 1
    return ReplayTarget(operator, store, chosen, version)


def plan_partition(
    ckpt: Checkpoint, target: ReplayTarget, partition: int, *, best_effort: bool = False
) -> ReplayPlan:
    """The plan for one partition; with ``best_effort`` the newest loadable version at or
    below the target (a note says so) instead of an error."""
    try:
        return plan_version(ckpt, target.operator, partition, target.version, store=target.store)
    except StateUnavailable as exc:
        if not best_effort:
            raise
        first_error = exc
    part = ckpt.operators[target.operator].stores[target.store].partitions[partition]
    for v in reversed([v for v in part.version_ids if v < target.version]):
        try:
            plan = plan_version(ckpt, target.operator, partition, v, store=target.store)
        except StateUnavailable:
            continue
        target.notes.append(
            f"{first_error.message}; replayed version {v} (after batch {v - 1}) instead"
        )
        return plan
    raise first_error


# -- rows ------------------------------------------------------------------------------------


Filter = Callable[[Any], bool]


def key_filter(where: list[str] | None, decoder: RowDecoder) -> Filter | None:
    """``--where COL=VALUE`` (repeatable, all must hold) against the decoded key."""
    if not where:
        return None
    if decoder.schema is None:
        raise CkptError("--where needs the store's schema file, and there is none")
    names = set(decoder.schema.key.unique_names())
    conditions: list[tuple[str, str]] = []
    for item in where:
        column, sep, value = item.partition("=")
        if not sep:
            raise CkptError(f"--where {item!r}: expected COLUMN=VALUE")
        if column not in names:
            raise CkptError(
                f"--where {item!r}: the key has no column {column!r} "
                f"(columns: {', '.join(sorted(names))})"
            )
        conditions.append((column, value))

    def matches(key: Any) -> bool:
        for column, value in conditions:
            got = json_value(key.get(column)) if isinstance(key, dict) else None
            if got is None and value.lower() == "null":
                continue
            if not isinstance(got, str):
                got = json.dumps(got)
            if got != value:
                return False
        return True

    return matches


def decoder_for(ckpt: Checkpoint, operator: int, store: str, *, raw: bool = False) -> RowDecoder:
    provider = ckpt.operators[operator].stores[store].provider
    schema = None if raw else store_schema(ckpt, operator, store)
    return RowDecoder(schema, provider, path=f"state/{operator}")


def iter_rows(
    ckpt: Checkpoint,
    plan: ReplayPlan,
    decoder: RowDecoder,
    where: Filter | None = None,
    progress: ProgressSink = NULL_PROGRESS,
) -> Iterator[dict[str, Any]]:
    """``{"partition_id", "key", "value"}`` rows of one partition, JSON-ready."""
    pid = plan.partition
    json_row = decoder.json_row
    for k, v in iter_state(ckpt, plan, progress):
        key, value = json_row(k, v)
        if where is not None and not where(key):
            continue
        yield {"partition_id": pid, "key": key, "value": value}


def iter_lines(ckpt: Checkpoint, plan: ReplayPlan, decoder: RowDecoder) -> Iterator[str]:
    """The rows of ``iter_rows`` as JSON lines, through the schema-compiled encoder when the
    schema allows (same JSON, several times faster)."""
    encoder = LineEncoder(decoder)
    line = encoder.line
    pid = plan.partition
    for k, v in iter_state(ckpt, plan):
        yield line(pid, k, v)


def iter_change_rows(
    ckpt: Checkpoint,
    target: ReplayTarget,
    start_batch: int,
    end_batch: int,
    decoder: RowDecoder,
    where: Filter | None = None,
    *,
    best_effort: bool = False,
) -> Iterator[dict[str, Any]]:
    """The change feed: per batch and partition, each put (``update``), delete and merge the
    batch wrote, read from its delta or changelog file, in the shape of Spark 4's
    ``readChangeFeed`` rows.

    The files are chosen now (errors and ``target.notes`` come before any row): as Spark does,
    format v2 follows the changelog lineage back from the end batch; with ``best_effort`` a
    broken lineage falls back to the changelogs the commit log names, and a note says so.
    """
    if start_batch > end_batch:
        raise CkptError(f"--from {start_batch} is after --to {end_batch}")
    files = {}
    for pid in target.partitions:
        chosen = _change_files(ckpt, target, pid, start_batch, end_batch, best_effort)
        for batch, f in zip(range(start_batch, end_batch + 1), chosen, strict=True):
            files[(batch, pid)] = f
    return _change_rows(ckpt, files, decoder, where)


def _change_files(
    ckpt: Checkpoint,
    target: ReplayTarget,
    pid: int,
    start_batch: int,
    end_batch: int,
    best_effort: bool,
) -> list[CheckpointFile]:
    op, store = target.operator, target.store
    try:
        return change_files(ckpt, op, pid, start_batch + 1, end_batch + 1, store=store)
    except StateUnavailable as exc:
        if not best_effort:
            raise
        first_error = exc
    try:
        chosen = [
            change_file(ckpt, op, pid, batch + 1, store=store)
            for batch in range(start_batch, end_batch + 1)
        ]
    except StateUnavailable:
        raise first_error from None
    target.notes.append(
        f"{first_error.message}; read the changelogs of the commit log's uniqueIds instead: "
        + ", ".join(f.entry.name for f in chosen)
    )
    return chosen


def _change_rows(
    ckpt: Checkpoint,
    files: dict[tuple[int, int], CheckpointFile],
    decoder: RowDecoder,
    where: Filter | None,
) -> Iterator[dict[str, Any]]:
    for (batch, pid), f in sorted(files.items()):
        for kind, k, v in iter_file_records(ckpt, f):
            key = decoder.key(k)
            if where is not None and not where(key):
                continue
            yield {
                "batch_id": batch,
                "change_type": "update" if kind == "put" else kind,
                "partition_id": pid,
                "key": json_value(key),
                "value": json_value(decoder.value(v)) if v is not None else None,
            }


# -- writing ---------------------------------------------------------------------------------


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}", v, out)
    elif isinstance(value, list):
        out[prefix] = json.dumps(value, ensure_ascii=False)
    else:
        out[prefix] = value


def flat_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row with nested key/value columns as ``key.col`` / ``value.col`` (for CSV)."""
    out: dict[str, Any] = {}
    for name, value in row.items():
        if isinstance(value, dict):
            _flatten(name, value, out)
        else:
            out[name] = value
    return out


class RowWriter:
    """Writes rows as JSON lines or CSV to a text stream."""

    def __init__(self, out: IO[str], fmt: str, *, header: bool = True) -> None:
        self.out = out
        self.fmt = fmt
        self.header = header
        self._csv: csv.DictWriter[str] | None = None
        self.count = 0

    def write(self, row: dict[str, Any]) -> None:
        self.count += 1
        if self.fmt == "jsonl":
            # orjson: the JSON encoding is most of the time of a large replay.
            self.out.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE).decode())
            return
        flat = flat_row(row)
        if self._csv is None:
            self._csv = csv.DictWriter(self.out, fieldnames=list(flat), extrasaction="ignore")
            if self.header:
                self._csv.writeheader()
        self._csv.writerow(flat)


@dataclass(frozen=True)
class _PartitionJob:
    plan: ReplayPlan
    raw: bool
    where: tuple[str, ...]
    fmt: str
    limit: int | None
    out_path: str


_WORKER_CHECKPOINT: Checkpoint | None = None


def _init_worker(storage: Storage, listing: Listing) -> None:
    # Each worker builds the model once from the parent's listing: no new listing calls.
    global _WORKER_CHECKPOINT
    _WORKER_CHECKPOINT = Checkpoint(storage, listing)


def _write_partition(job: _PartitionJob) -> tuple[str, int]:
    """In a worker: replay one partition into ``job.out_path``; returns (path, rows)."""
    ckpt = _WORKER_CHECKPOINT
    assert ckpt is not None
    decoder = decoder_for(ckpt, job.plan.operator, job.plan.store, raw=job.raw)
    matches = key_filter(list(job.where), decoder)
    with open(job.out_path, "w", encoding="utf-8", newline="") as fh:
        if job.fmt == "jsonl" and matches is None:
            count = 0
            for line in iter_lines(ckpt, job.plan, decoder):
                fh.write(line)
                count += 1
            return job.out_path, count
        writer = RowWriter(fh, job.fmt, header=False)
        for row in iter_rows(ckpt, job.plan, decoder, matches):
            if job.limit is not None and writer.count >= job.limit:
                break
            writer.write(row)
    return job.out_path, writer.count


def write_partitions(
    ckpt: Checkpoint,
    plans: list[ReplayPlan],
    out: IO[str],
    fmt: str,
    *,
    raw: bool = False,
    where: list[str] | None = None,
    limit: int | None = None,
    workers: int | None = None,
    progress: ProgressSink = NULL_PROGRESS,
) -> int:
    """Replay ``plans`` (one per partition) as JSON lines or CSV into ``out``; returns rows.

    Several partitions on local storage go to worker processes (decoding is CPU work); their
    outputs are copied to ``out`` in partition order.
    """
    decoder = decoder_for(ckpt, plans[0].operator, plans[0].store, raw=raw)
    matches = key_filter(where, decoder)  # validates --where before any work
    workers = workers or os.cpu_count() or 1
    progress.start("Replaying partitions", total=len(plans))
    try:
        # CSV's header comes from the first row, so it stays in one process.
        parallel = len(plans) > 1 and workers > 1 and ckpt.storage.is_local
        if parallel and limit is None and fmt == "jsonl":
            return _write_parallel(ckpt, plans, out, fmt, raw, where, workers, progress)
        if fmt == "jsonl" and matches is None:
            count = 0
            for plan in plans:
                for line in iter_lines(ckpt, plan, decoder):
                    if limit is not None and count >= limit:
                        return count
                    out.write(line)
                    count += 1
                progress.advance()
            return count
        writer = RowWriter(out, fmt)
        for plan in plans:
            for row in iter_rows(ckpt, plan, decoder, matches):
                if limit is not None and writer.count >= limit:
                    return writer.count
                writer.write(row)
            progress.advance()
        return writer.count
    finally:
        progress.close()


def _write_parallel(
    ckpt: Checkpoint,
    plans: list[ReplayPlan],
    out: IO[str],
    fmt: str,
    raw: bool,
    where: list[str] | None,
    workers: int,
    progress: ProgressSink,
) -> int:
    total = 0
    with tempfile.TemporaryDirectory(prefix="ckpt-replay-") as tmp:
        jobs = [
            _PartitionJob(plan, raw, tuple(where or ()), fmt, None, f"{tmp}/{plan.partition}")
            for plan in plans
        ]
        with ProcessPoolExecutor(
            max_workers=min(workers, len(jobs)),
            initializer=_init_worker,
            initargs=(ckpt.storage, ckpt.listing),
        ) as pool:
            for path, count in pool.map(_write_partition, jobs):
                with open(path, encoding="utf-8", newline="") as fh:
                    while chunk := fh.read(1 << 20):
                        out.write(chunk)
                os.unlink(path)
                total += count
                progress.advance()
    return total


def collect_rows(rows: Iterable[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for row in rows:
        if limit is not None and len(out) >= limit:
            break
        out.append(row)
    return out


# -- datasets (replay at scale) ----------------------------------------------------------------


@dataclass(frozen=True)
class _DatasetUnit:
    """One partition to replay into ``<output>/partition_id=<p>/``: its plan and the listing
    entries its replay reads (the partition directory, the latest offsets entry)."""

    plan: ReplayPlan
    entries: tuple[FileEntry, ...]


@dataclass(frozen=True)
class _DatasetSettings:
    storage: Storage
    output: str
    fmt: str
    raw: bool
    where: tuple[str, ...]
    storage_options: dict[str, Any]


_DATASET: _DatasetSettings | None = None


def _init_dataset(settings: _DatasetSettings) -> None:
    global _DATASET
    _DATASET = settings


def _replay_unit(unit: _DatasetUnit) -> int:
    """On a worker or Spark executor: replay one partition and write its rows as one file."""
    settings = _DATASET
    assert settings is not None
    ext = "parquet" if settings.fmt == "parquet" else "jsonl"
    target = f"{settings.output.rstrip('/')}/partition_id={unit.plan.partition}/part-00000.{ext}"
    try:
        return _write_unit(unit, settings, target)
    except CkptError:
        raise
    except Exception as exc:
        # The output store's own errors (no credentials, refused, denied) in one line.
        if isinstance(exc, OSError) or classify_store_error(exc)[0] != "other":
            raise store_error(redact_url(target), "write", exc) from exc
        raise


def _write_unit(unit: _DatasetUnit, settings: _DatasetSettings, target: str) -> int:
    import fsspec.core

    ckpt = Checkpoint(settings.storage, Listing(list(unit.entries)))
    plan = unit.plan
    decoder = decoder_for(ckpt, plan.operator, plan.store, raw=settings.raw)
    matches = key_filter(list(settings.where), decoder)
    rows = iter_rows(ckpt, plan, decoder, matches)
    count = 0
    if settings.fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        batch: list[dict[str, Any]] = []
        writer = None
        with fsspec.core.open(target, "wb", auto_mkdir=True, **settings.storage_options) as fh:
            for row in rows:
                row.pop("partition_id")  # it is the directory (Hive-style partitioning)
                batch.append(row)
                count += 1
                if len(batch) >= 65536:
                    table = pa.Table.from_pylist(batch)
                    writer = writer or pq.ParquetWriter(fh, table.schema)
                    writer.write_table(table)
                    batch = []
            if batch or writer is None:
                table = pa.Table.from_pylist(batch)
                writer = writer or pq.ParquetWriter(fh, table.schema)
                writer.write_table(table)
            writer.close()
        return count
    with fsspec.core.open(
        target, "w", encoding="utf-8", auto_mkdir=True, **settings.storage_options
    ) as fh:
        if matches is None:
            for line in iter_lines(ckpt, plan, decoder):
                fh.write(line)
                count += 1
            return count
        for row in rows:
            fh.write(orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE).decode())
            count += 1
    return count


def write_dataset(
    ckpt: Checkpoint,
    plans: list[ReplayPlan],
    output: str,
    fmt: str,
    *,
    engine: Engine,
    raw: bool = False,
    where: list[str] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> dict[int, int]:
    """Replay every plan's partition into ``output`` (a local path or URL), one directory per
    partition (``partition_id=<p>``), on ``engine``; returns rows per partition."""
    if fmt not in ("jsonl", "parquet"):
        raise CkptError(f"--output DIR writes jsonl or parquet, not {fmt}")
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError as exc:
            raise MissingExtraError(
                "--format parquet needs pyarrow", hint="pip install 'ckpt-cli[parquet]'"
            ) from exc
    decoder = decoder_for(ckpt, plans[0].operator, plans[0].store, raw=raw)
    key_filter(where, decoder)  # validates --where before any work
    latest = ckpt.batches.latest_offsets
    shared = [e for e in ckpt.listing if e.path in ("metadata", f"offsets/{latest}")]
    schema_prefixes = tuple(
        f"{f.path.rsplit('/', 1)[0]}/"
        for f in ckpt.of_kind(FileKind.STATE_SCHEMA)
        if f.operator == plans[0].operator
    )
    units = []
    for plan in plans:
        prefix = plan.path + "/"
        entries = [
            e
            for e in ckpt.listing
            if e.path.startswith(prefix) or e.path.startswith(schema_prefixes)
        ]
        units.append(_DatasetUnit(plan, tuple(shared + entries)))
    settings = _DatasetSettings(
        ckpt.storage, output, fmt, raw, tuple(where or ()), fsspec_options(output, storage_options)
    )
    counts = engine.map(
        _replay_unit,
        units,
        cpu_bound=ckpt.storage.is_local,
        initializer=_init_dataset,
        initargs=(settings,),
    )
    return {plan.partition: n for plan, n in zip(plans, counts, strict=True)}
