"""``ckpt convert`` on a distributed engine (``--engine spark``), for states larger than one
machine: each store partition is read and converted by a task of its own (a conversion
moves no record between partitions), its bytes staying on the checkpoint's filesystem; only
counts, names and sizes travel to the driver.

* planning: one task per store partition counts the keys and bytes it converts;
* applying: one task per store partition builds version N+2's files
  (:func:`partition_files`, as the driver does on one machine) into
  ``<quarantine>/staging/<operator>/<store>/<partition>/``; the driver then moves them in
  :mod:`~ckpt_cli.convert.apply`'s order, under its manifest, so kill safety and ``--undo``
  are the same. The staging directory is never in the checkpoint, and is removed at the end.
"""

from __future__ import annotations

import tempfile
import uuid
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ckpt_cli.convert.plan import (
    ConvertPlan,
    PrefixKey,
    converted_records,
    partition_source,
)
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.core.rebuild import codec_of
from ckpt_cli.core.shipped import ShippedCheckpoint
from ckpt_cli.formats.checksums import hadoop_crc_bytes
from ckpt_cli.formats.names import hadoop_crc_name
from ckpt_cli.formats.rocksdb_write import (
    VersionOptions,
    merge_delimiter,
    write_rocksdb_checkpoint,
)
from ckpt_cli.formats.snapshot_write import hdfs_snapshot_chunks
from ckpt_cli.formats.state_encoders import row_checksums
from ckpt_cli.progress import ProgressSink
from ckpt_cli.state.tws import list_families
from ckpt_cli.storage import Storage

if TYPE_CHECKING:
    from ckpt_cli.engine import Engine

U = TypeVar("U")
R = TypeVar("R")


@dataclass(frozen=True)
class PartUnit:
    """One store partition of a conversion."""

    operator: int
    store: str
    partition: int
    prefix_key: PrefixKey | None


# (name in the partition's directory, size) of its new files in write order, its uniqueId.
Built = tuple[list[tuple[str, int]], str | None]


def partition_files(
    ckpt: Checkpoint, plan: ConvertPlan, unit: PartUnit, dest: Path
) -> tuple[list[str], str | None]:
    """Version N+2 of one store partition built under the local directory ``dest`` (which
    must not exist): the file names in the order they are written (SSTs, then the zip and
    its Spark checksum; or the snapshot), relative to the partition's directory, and the
    zip's uniqueId in format v2."""
    source = partition_source(
        ckpt, plan, unit.operator, unit.store, unit.partition, unit.prefix_key
    )
    records = converted_records(ckpt, plan, source)
    if plan.provider == "hdfs":
        dest.mkdir(parents=True)
        name = f"{plan.version}.snapshot"
        with open(dest / name, "wb") as fh:
            for piece in hdfs_snapshot_chunks(records, codec_of(ckpt)):
                fh.write(piece)
        return [name], None
    unique_id = str(uuid.uuid4()) if plan.format_version == 2 else None
    options = VersionOptions(
        unique_id=unique_id,  # format v2: Spark's <zip>.crc beside it, as 4.1+ writes
        template=source.template,
        list_families=list_families(ckpt, unit.operator) if source.template else (),
        delimiter=merge_delimiter(ckpt.conf),
        row_checksums=row_checksums(ckpt.conf),
    )
    written = write_rocksdb_checkpoint(records, plan.version, dest, options)
    return list(written.names), unique_id


def is_zip_entry(name: str) -> bool:
    """A zip, or a checksum of it, by its name in the partition's directory (the SSTs and
    logs are in directories of their own)."""
    return "/" not in name and ".zip" in name


@dataclass(frozen=True)
class _Shared:
    checkpoint: ShippedCheckpoint
    plan: ConvertPlan
    staging: Storage | None


_SHARED: tuple[_Shared, Checkpoint] | None = None


def _init(shared: _Shared) -> None:
    global _SHARED
    _SHARED = shared, shared.checkpoint.open()


def _count_unit(unit: PartUnit) -> tuple[int, int]:
    """In a task: the keys and record bytes one partition converts."""
    assert _SHARED is not None
    shared, ckpt = _SHARED
    source = partition_source(
        ckpt, shared.plan, unit.operator, unit.store, unit.partition, unit.prefix_key
    )
    keys = size = 0
    for key, value in converted_records(ckpt, shared.plan, source):
        keys += 1
        size += len(key) + len(value)
    return keys, size


def staged_dir(unit: PartUnit) -> str:
    return f"{unit.operator}/{unit.store}/{unit.partition}"


def _build_unit(unit: PartUnit) -> Built:
    """In a task: one partition's files, built locally and written into the staging (with
    Hadoop's checksum beside each when the checkpoint is on local disk, as Spark's local
    file system writes them)."""
    assert _SHARED is not None
    shared, ckpt = _SHARED
    staging = shared.staging
    assert staging is not None
    out: list[tuple[str, int]] = []
    with tempfile.TemporaryDirectory(prefix="ckpt-convert-task-") as tmp:
        dest = Path(tmp) / "files"
        names, unique_id = partition_files(ckpt, shared.plan, unit, dest)
        for name in names:
            local = dest / name
            staging.write_file(f"{staged_dir(unit)}/{name}", str(local))
            out.append((name, local.stat().st_size))
            if ckpt.storage.is_local:
                crc = hadoop_crc_bytes(local.read_bytes())
                staging.write_bytes(f"{staged_dir(unit)}/{hadoop_crc_name(name)}", crc)
                out.append((hadoop_crc_name(name), len(crc)))
    return out, unique_id


def count_partitions(
    ckpt: Checkpoint,
    plan: ConvertPlan,
    units: list[PartUnit],
    engine: Engine,
    progress: ProgressSink,
) -> list[tuple[int, int]]:
    """``(keys, bytes)`` of every unit, one task each."""
    shared = _Shared(ShippedCheckpoint.of(ckpt), plan, None)
    return engine.tasks("Reading state", _count_unit, units, partial(_init, shared), progress)


def build_partitions(
    ckpt: Checkpoint,
    plan: ConvertPlan,
    units: list[PartUnit],
    staging: Storage,
    engine: Engine,
    progress: ProgressSink,
) -> list[Built]:
    """Every unit's new files, built by one task each into ``staging``."""
    shared = _Shared(ShippedCheckpoint.of(ckpt), plan, staging)
    return engine.tasks("Building partitions", _build_unit, units, partial(_init, shared), progress)


__all__ = ["Built", "PartUnit", "build_partitions", "count_partitions", "partition_files"]
