"""Version N+2 of one store partition, written as Spark writes a batch that removed keys from
it (or changed nothing in it): the file the store's provider, changelog setting and
checkpoint format take.

* HDFS-backed store: ``N+2.delta`` of the removals (none: only the end mark).
* RocksDB with changelog checkpointing: ``N+2.changelog`` of deletes, in the changelog version
  the store writes (V1/V2; in checkpoint format v2 V3/V4, named ``N+2_<uniqueId>`` with the
  lineage from the base zip of version N+1 up to N+1, as ``6_….changelog`` of a real 4.3
  checkpoint shows it).
* RocksDB without: a zip of the keys kept; when nothing is removed and version N+1 is a zip,
  that zip again (its SSTs shared, as Spark uploads a batch that changed nothing).

Every operator's stores get version N+2, the ones a change leaves alone too: Spark loads
version N+2 of each when it resumes at batch N+2. Spark's ``<name>.crc`` checksum goes beside
a file where the version before has one (4.1+, format v2).
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ckpt_cli.change.batch import BatchWriter, FileWriter
from ckpt_cli.core.layout import FileKind, StoreLocation
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.core.read import iter_state, read_zip_metadata
from ckpt_cli.core.rebuild import ReplayPlan, codec_of, plan_version, read_changelog_header
from ckpt_cli.core.unfinished import batch_partitions
from ckpt_cli.errors import CkptError
from ckpt_cli.formats.changelog_write import encode_changelog_removals
from ckpt_cli.formats.checksums import spark_checksum_bytes
from ckpt_cli.formats.records import LineageEntry
from ckpt_cli.formats.rocksdb_write import (
    VersionOptions,
    merge_delimiter,
    write_rocksdb_checkpoint,
)
from ckpt_cli.formats.snapshot_write import encode_removals
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.state.tws import list_families

# How a store's version N+2 is written.
DELTA, CHANGELOG, SNAPSHOT = "delta", "changelog", "snapshot"


def store_writes(ckpt: Checkpoint, operator: int, store: str) -> str:
    """``delta``, ``changelog`` or ``snapshot``: what Spark writes for this store's batches."""
    st = ckpt.operators[operator].stores[store]
    if st.provider == "hdfs":
        return DELTA
    changelogs = any(f.kind is FileKind.CHANGELOG for p in st.partitions.values() for f in p.files)
    return CHANGELOG if changelogs else SNAPSHOT


def write_removals(
    ckpt: Checkpoint,
    out: FileWriter,
    *,
    operator: int,
    store: str,
    partition: int,
    last: int,
    removed: Collection[bytes] = (),
    writes: str,
    changelog_version: int = 1,
) -> str | None:
    """Write version ``last + 2`` of the store partition: version ``last + 1`` without the
    ``removed`` keys (stored bytes), as the store ``writes`` (:func:`store_writes`; a
    changelog in ``changelog_version``, :func:`store_changelog_version`). Returns the new
    version's uniqueId (format v2), else None."""
    part = ckpt.operators[operator].stores[store].partitions[partition]
    before = plan_version(ckpt, operator, partition, last + 1, store=store)
    version = last + 2
    unique_id = str(uuid.uuid4()) if before.unique_id is not None else None
    stem = f"{part.path}/{version}" + (f"_{unique_id}" if unique_id else "")
    codec = codec_of(ckpt)
    if writes == DELTA:
        out.write(f"{stem}.delta", encode_removals(removed, codec))
        return None
    checksum = _has_spark_checksum(ckpt, before)
    if writes == CHANGELOG:
        lineage = _lineage(before) if unique_id else ()
        data = encode_changelog_removals(removed, codec, changelog_version, lineage)
        _write(out, f"{stem}.changelog", data, checksum)
        return unique_id
    base = before.base
    if not removed and not before.steps and base is not None and base.kind is FileKind.ZIP:
        _write(out, f"{stem}.zip", ckpt.storage.read_bytes(base.path), checksum)
        return unique_id
    gone = set(removed)
    kept = ((k, v) for k, v in iter_state(ckpt, before) if k not in gone)
    template = None
    if base is not None and base.kind is FileKind.ZIP:
        template = read_zip_metadata(ckpt.storage, base.path, base.entry.size)
    options = VersionOptions(
        unique_id=unique_id,
        template=template,
        checksum_file=checksum,
        list_families=list_families(ckpt, operator),
        delimiter=merge_delimiter(ckpt.conf),
    )
    with tempfile.TemporaryDirectory(prefix="ckpt-version-") as tmp:
        dest = Path(tmp) / "files"
        written = write_rocksdb_checkpoint(kept, version, dest, options)
        for name in written.names:  # the SSTs first, the zip that names them last
            out.write(f"{part.path}/{name}", (dest / name).read_bytes())
    return unique_id


def _write(out: FileWriter, rel: str, data: bytes, checksum: bool) -> None:
    out.write(rel, data)
    if checksum:
        out.write(f"{rel}.crc", spark_checksum_bytes(data))


def _has_spark_checksum(ckpt: Checkpoint, before: ReplayPlan) -> bool:
    newest = before.files[-1] if before.files else None
    return newest is not None and ckpt.listing.get(f"{newest.path}.crc") is not None


def _lineage(before: ReplayPlan) -> list[LineageEntry]:
    """Version N+2's lineage: the versions that rebuild N+1, from its base zip on."""
    lineage = []
    for f in before.files:
        if f.version is None or f.unique_id is None:
            raise CkptError(
                f"{f.path}: a file without a uniqueId on the lineage of checkpoint format v2"
            )
        lineage.append(LineageEntry(f.version, f.unique_id))
    return lineage


def store_changelog_version(ckpt: Checkpoint, operator: int, store: str, last: int) -> int:
    """The changelog version a RocksDB store writes: its newest changelog's (V1-V4, one
    header read); a store whose changelogs are all gone takes V1/V2 (format v1) or V3/V4
    (format v2) by whether it has column families."""
    st = ckpt.operators[operator].stores[store]
    changelogs = [
        f for p in st.partitions.values() for f in p.files if f.kind is FileKind.CHANGELOG
    ]
    if changelogs:
        newest = max(changelogs, key=lambda f: f.version or 0)
        return read_changelog_header(ckpt, newest).format_version
    before = plan_version(ckpt, operator, min(st.partitions), last + 1, store=store)
    families = False
    if before.base is not None and before.base.kind is FileKind.ZIP:
        meta = read_zip_metadata(ckpt.storage, before.base.path, before.base.entry.size)
        families = bool(meta.column_family_mapping)
    return (3 if before.unique_id else 1) + int(families)


@dataclass(frozen=True)
class VersionUnit:
    """Version N+2 of one store partition, as a unit of work (picklable: an engine's task
    writes it into a staging area): the store's place in its operator (``index``, for
    ``commits/N``'s uniqueIds), how it is written, and the keys it loses."""

    operator: int
    store: str
    index: int
    partition: int
    writes: str
    changelog_version: int
    removed: tuple[bytes, ...] = ()


def version_units(
    ckpt: Checkpoint, last: int, removed: Mapping[StoreLocation, Collection[bytes]]
) -> list[VersionUnit]:
    """Every store partition of every operator, in the order their files are written."""
    units = []
    for op_id, op in ckpt.operators.items():
        for index, (name, store) in enumerate(op.stores.items()):
            writes = store_writes(ckpt, op_id, name)
            version = 1
            if writes == CHANGELOG:
                version = store_changelog_version(ckpt, op_id, name, last)
            for partition in batch_partitions(ckpt, store):
                gone = tuple(removed.get(StoreLocation(op_id, partition, name), ()))
                units.append(VersionUnit(op_id, name, index, partition, writes, version, gone))
    return units


def write_unit(ckpt: Checkpoint, out: FileWriter, last: int, unit: VersionUnit) -> str | None:
    """One unit's files through ``out``; its uniqueId (format v2), else None."""
    return write_removals(
        ckpt,
        out,
        operator=unit.operator,
        store=unit.store,
        partition=unit.partition,
        last=last,
        removed=unit.removed,
        writes=unit.writes,
        changelog_version=unit.changelog_version,
    )


def unique_ids_of(
    ckpt: Checkpoint, units: Sequence[VersionUnit], ids: Sequence[str | None]
) -> dict[int, list[list[str]]]:
    """The uniqueIds of format v2 as ``commits/N`` records them (operator -> partition ->
    store, in the operator's store order), or nothing in format v1."""
    unique_ids: dict[int, list[list[str]]] = {}
    for unit, unique_id in zip(units, ids, strict=True):
        if unique_id is not None:
            rows = unique_ids.setdefault(unit.operator, [])
            while len(rows) <= unit.partition:
                rows.append([""] * len(ckpt.operators[unit.operator].stores))
            rows[unit.partition][unit.index] = unique_id
    return unique_ids


def write_state_version(
    ckpt: Checkpoint,
    out: BatchWriter,
    *,
    last: int,
    removed: Mapping[StoreLocation, Collection[bytes]],
    progress: ProgressSink = NULL_PROGRESS,
) -> dict[int, list[list[str]]]:
    """Version ``last + 2`` of every store partition of every operator (``removed``: the keys
    each loses; the others are written unchanged). Returns the uniqueIds of format v2 as
    ``commits/N`` records them (operator -> partition -> store, in the operator's store
    order), or nothing in format v1."""
    units = version_units(ckpt, last, removed)
    ids = []
    progress.start("Writing partitions", total=len(units))
    try:
        for unit in units:
            ids.append(write_unit(ckpt, out, last, unit))
            progress.advance()
    finally:
        progress.close()
    return unique_ids_of(ckpt, units, ids)
