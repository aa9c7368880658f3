"""A dataset of the replayed state: one ``partition_id=<p>/`` folder per state partition,
written on an engine (local pools or Spark tasks), each unit replaying its partition and
writing its own file through ``Storage.open_write`` (any store ckpt reads is an output).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ckpt_cli.core.model import Checkpoint, FileKind
from ckpt_cli.core.rebuild import ReplayPlan
from ckpt_cli.engine import Engine
from ckpt_cli.errors import CkptError
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.replay.sinks import write_parquet, write_tables, write_text
from ckpt_cli.state.columns import columnar_for, line_chunks, plan_tables
from ckpt_cli.state.decoders import require_pyarrow, row_filter
from ckpt_cli.state.families import FamilyRead, family_filter, family_rows
from ckpt_cli.state.reader import StateRows, Where, decoder_for, iter_rows
from ckpt_cli.storage import FileEntry, Listing, Storage, classify_store_error, store_error

DATASET_FORMATS = ("jsonl", "parquet")


@dataclass(frozen=True)
class _DatasetUnit:
    """One partition to replay into ``partition_id=<p>/``: its plan and the listing entries
    its replay reads (the partition directory, schema files, metadata, latest offsets)."""

    plan: ReplayPlan
    entries: tuple[FileEntry, ...]


@dataclass(frozen=True)
class _DatasetSettings:
    """What every partition's replay shares: handed to each worker once, by the engine's
    initializer (``_init_dataset``), not with each unit."""

    storage: Storage
    output: str
    storage_options: dict[str, Any]
    fmt: str
    raw: bool
    where: Where
    family: FamilyRead | None = None  # one family of a store of several


_DATASET: tuple[_DatasetSettings, Storage] | None = None


def _init_dataset(settings: _DatasetSettings) -> None:
    # The output's filesystem is made in each process: a forked copy of the parent's
    # (s3fs, adlfs: an event loop and connections) is not usable.
    global _DATASET
    _DATASET = settings, Storage.from_url(settings.output, settings.storage_options)


def _replay_unit(unit: _DatasetUnit) -> int:
    """On a worker or Spark executor: replay one partition and write its rows as one file."""
    assert _DATASET is not None
    settings, output = _DATASET
    ext = "parquet" if settings.fmt == "parquet" else "jsonl"
    rel = f"partition_id={unit.plan.partition}/part-00000.{ext}"
    try:
        return _write_unit(unit, settings, output, rel)
    except CkptError:
        raise
    except Exception as exc:
        # The output store's own errors (no credentials, refused, denied) in one line.
        if isinstance(exc, OSError) or classify_store_error(exc)[0] != "other":
            where = f"{output.url.rstrip('/')}/{rel}"
            raise store_error(where, "write", exc) from exc
        raise


def _write_unit(unit: _DatasetUnit, settings: _DatasetSettings, output: Storage, rel: str) -> int:
    ckpt = Checkpoint(settings.storage, Listing(list(unit.entries)))
    plan = unit.plan
    if settings.family is not None:
        return _write_family_unit(ckpt, plan, settings, output, rel)
    decoder = decoder_for(ckpt, plan.operator, plan.store, raw=settings.raw)
    matches = row_filter(settings.where, decoder.schema)
    with output.open_write(rel) as fh:
        if settings.fmt == "parquet":
            columnar = columnar_for(decoder) if matches is None else None
            if columnar is not None:
                tables = plan_tables(ckpt, [plan], columnar, workers=1)  # units run side by side
                # partition_id is the directory (Hive-style partitioning)
                return write_tables((t.drop_columns(["partition_id"]) for t in tables), fh)
            rows = iter_rows(ckpt, plan, decoder, matches)
            return write_parquet((_without_partition(row) for row in rows), fh)
        if matches is None:
            count = 0
            for chunk, n in line_chunks(ckpt, plan, decoder):
                fh.write(chunk)
                count += n
            return count
        text = io.TextIOWrapper(fh, encoding="utf-8", newline="")
        count = write_text(iter_rows(ckpt, plan, decoder, matches), text)
        text.flush()
        text.detach()  # the binary file is closed by open_write
        return count


def _write_family_unit(
    ckpt: Checkpoint, plan: ReplayPlan, settings: _DatasetSettings, output: Storage, rel: str
) -> int:
    """``_write_unit`` of one family of the store (a state variable, timers, join family)."""
    assert settings.family is not None
    reader = settings.family.reader(ckpt)
    rows = family_rows(ckpt, plan, reader, family_filter(reader, settings.where))
    with output.open_write(rel) as fh:
        if settings.fmt == "parquet":
            schema = reader.arrow_schema()
            if schema is not None:  # the partition is the directory's name
                schema = schema.remove(schema.get_field_index("partition_id"))
            return write_parquet((_without_partition(row) for row in rows), fh, schema)
        text = io.TextIOWrapper(fh, encoding="utf-8", newline="")
        count = write_text(rows, text)
        text.flush()
        text.detach()  # the binary file is closed by open_write
        return count


def _without_partition(row: dict[str, Any]) -> dict[str, Any]:
    del row["partition_id"]  # it is the directory (Hive-style partitioning)
    return row


def write_dataset(
    rows: StateRows,
    output: str,
    fmt: str,
    *,
    engine: Engine,
    storage_options: Mapping[str, Any] | None = None,
    progress: ProgressSink = NULL_PROGRESS,
) -> dict[int, int]:
    """The state rows under ``output`` (a local path or URL), one folder per partition
    (``partition_id=<p>/part-00000.<fmt>``), on ``engine``; returns rows per partition.
    ``progress`` counts the partitions written."""
    if rows.changes is not None:
        raise CkptError("a dataset holds the state at a batch, not the change feed")
    if fmt not in DATASET_FORMATS:
        raise CkptError(f"a dataset is written as jsonl or parquet, not {fmt}")
    if fmt == "parquet":
        require_pyarrow("parquet output")
    ckpt, plans = rows.ckpt, rows.plans
    latest = ckpt.batches.latest_offsets
    shared = [e for e in ckpt.listing if e.path in ("metadata", f"offsets/{latest}")]
    schema_prefixes = tuple(
        f"{f.path.rsplit('/', 1)[0]}/"
        for f in ckpt.of_kind(FileKind.STATE_SCHEMA)
        if f.operator == rows.target.operator
    ) + (f"state/{rows.target.operator}/_metadata/",)  # operator metadata v2: state variables
    units = []
    for plan in plans:
        prefix = plan.path + "/"
        entries = [
            e
            for e in ckpt.listing
            if e.path.startswith(prefix) or e.path.startswith(schema_prefixes)
        ]
        units.append(_DatasetUnit(plan, tuple(shared + entries)))
    Storage.from_url(output, storage_options)  # a bad URL or a missing extra fails here
    options = dict(storage_options or {})
    settings = _DatasetSettings(
        ckpt.storage, output, options, fmt, rows.raw, rows.where, rows.family
    )
    progress.start("Replaying partitions", total=len(units))
    try:
        counts = engine.map(
            _replay_unit,
            units,
            cpu_bound=ckpt.storage.is_local,
            initializer=_init_dataset,
            initargs=(settings,),
            progress=progress,
        )
    finally:
        progress.close()
    return {plan.partition: n for plan, n in zip(plans, counts, strict=True)}
