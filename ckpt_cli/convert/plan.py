"""Planning ``ckpt convert``: the state of the last committed batch N, every operator and
store, read as Spark reads it and re-encoded for another state store provider or RocksDB
checkpoint format; what the conversion batch N+1 writes (a full version N+2 of every
partition in the new files, ``offsets/N+1`` naming the provider class, ``commits/N+1`` in
the format's header) and which of the old files it moves to the quarantine.

Records differ between the providers only in framing (docs §3.2, §5.3): the HDFS-backed
store keeps a key and a value as bare UnsafeRows; RocksDB's ``NoPrefixKeyStateEncoder``
puts one encoding version byte (0) before each, and its ``PrefixKeyScanStateEncoder``
(session windows) keeps a key as two rows (:class:`PrefixKey`). Stores with column families
(transformWithState, joins in state format 3+) have no HDFS counterpart and are refused by
name. Between the checkpoint
formats of RocksDB (v1: ``<v>.zip``; v2: ``<v>_<uniqueId>.zip`` named by the commit log)
records move as they are, column families included, so every operator converts.

Spark 4.3 takes the format from the newest commit's header (``CheckpointVersionManager.
setSparkSessionConfigsForCommitLog`` sets ``checkpointFormatVersion`` from it: a query
never changes format by itself), and writes zip metadata ``v1`` in either format; Spark
4.0 wrote ``v2`` metadata in format v2, which 4.1 and later cannot read. A conversion
writes ``v1`` metadata, so converting a Spark 4.0 format-v2 checkpoint to format v2
rewrites its zips for 4.1+.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ckpt_cli.change.batch import NewBatch
from ckpt_cli.change.safety import last_batch_committed, links_refused
from ckpt_cli.core.layout import DEFAULT_STORE, FileKind
from ckpt_cli.core.model import Checkpoint, CheckpointFile, Operator, Store
from ckpt_cli.core.read import iter_state, read_zip_metadata, store_schema
from ckpt_cli.core.rebuild import ReplayPlan, plan_version, read_changelog_header
from ckpt_cli.core.unfinished import batch_partitions
from ckpt_cli.engine import Engine
from ckpt_cli.errors import CkptError, FormatError
from ckpt_cli.formats import logs
from ckpt_cli.formats.rocksdb_zip import RocksDBCheckpointMetadata
from ckpt_cli.formats.spark_types import StructType
from ckpt_cli.formats.state_encoders import (
    encode_prefix_scan_key,
    row_checksums,
    split_prefix_scan_key,
)
from ckpt_cli.formats.unsaferow import project_fields
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.results import Result, fields_json

PROVIDER_CLASSES = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
# The files of a provider's versions: what the conversion moves out of each partition.
PROVIDER_KINDS = {
    "hdfs": frozenset({FileKind.DELTA, FileKind.SNAPSHOT}),
    "rocksdb": frozenset({FileKind.ZIP, FileKind.CHANGELOG, FileKind.SST, FileKind.ROCKSDB_LOG}),
}
# RocksDB's encoding version byte before every key and value (STATE_ENCODING_VERSION).
ENCODING_VERSION = b"\x00"


class ConvertRefused(CkptError, code="CONVERT_REFUSED"):
    """``ckpt convert`` will not run on this checkpoint (the message says why)."""


@dataclass
class StoreConversion:
    """One store of one operator: its keys and record bytes (key + value) at batch N, over
    its partitions."""

    operator: int
    store: str
    partitions: int
    keys: int = 0
    bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, "operator store partitions keys bytes")


@dataclass
class ConvertPlan(NewBatch, Result):
    """What ``ckpt convert`` writes: batch ``batch`` (= last committed + 1) moves the state
    from ``provider_from`` to ``provider`` and from checkpoint format
    ``checkpoint_format_version`` to ``format_version``; every partition gets state version
    ``version`` in the new files, and the old ones (``moved``) go to the quarantine, where
    ``--undo`` takes them back from. ``zip_metadata_v2``: the RocksDB zips with Spark 4.0's
    metadata v2 that a conversion within format v2 rewrites."""

    checkpoint: str
    last_committed: int
    provider_from: str
    provider: str
    checkpoint_format_version: int
    format_version: int = 1
    zip_metadata_v2: int = 0
    stores: list[StoreConversion] = field(default_factory=list)
    moved: list[str] = field(default_factory=list, repr=False)
    moved_bytes: int = 0
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def nothing_to_do(self) -> bool:
        return (
            self.provider_from == self.provider
            and self.checkpoint_format_version == self.format_version
            and not self.zip_metadata_v2
        )

    @property
    def reframes(self) -> bool:
        """Whether records change framing (the provider changes) or move as they are."""
        return self.provider_from != self.provider

    @property
    def keys(self) -> int:
        return sum(s.keys for s in self.stores)

    @property
    def files_to_move(self) -> int:
        return len(self.moved)

    def body_json(self) -> dict[str, Any]:
        names = "checkpoint last_committed batch version provider_from provider"
        names += " checkpoint_format_version format_version zip_metadata_v2 keys stores"
        names += " files_to_move moved_bytes notes warnings"
        return fields_json(self, names)


def plan_convert(
    ckpt: Checkpoint,
    *,
    provider: str | None = None,
    format_version: int | None = None,
    progress: ProgressSink = NULL_PROGRESS,
    engine: Engine | None = None,
) -> ConvertPlan:
    """Plan the conversion of ``ckpt``'s state to ``provider`` (``hdfs`` or ``rocksdb``;
    None: the one it has) and RocksDB checkpoint ``format_version`` (1 or 2; None: the one
    it has, 1 for HDFS); nothing is written. Every store's state at the last committed batch
    is read (as the conversion will read it), so a state ckpt cannot read whole is refused
    here. ``engine``: a distributed one reads each store partition as a task."""
    url = ckpt.storage.url
    if provider is None and format_version is None:
        raise ConvertRefused("give --provider hdfs|rocksdb, --format-version 1|2, or both")
    if provider is not None and provider not in PROVIDER_CLASSES:
        raise ConvertRefused(f"--provider {provider}: ckpt converts to hdfs or rocksdb")
    if format_version not in (None, 1, 2):
        raise ConvertRefused(
            f"--format-version {format_version}: RocksDB's checkpoint formats are 1 and 2"
        )
    links = links_refused(ckpt)
    if links:
        raise ConvertRefused(f"{url}: not converting: {links[0]}")
    last = last_batch_committed(
        ckpt,
        ConvertRefused,
        "convert",
        unfinished="an unfinished conversion or repartition",
        undo="ckpt convert CHECKPOINT --undo rolls back an unfinished conversion",
    )
    current = ckpt.offsets(last).conf.get(logs.PROVIDER_CLASS)
    # The newest offsets entry is batch N's (an uncommitted one is refused above).
    provider_from = ckpt.configured_provider if current else _provider_of_files(ckpt)
    if provider_from not in PROVIDER_CLASSES:
        raise ConvertRefused(
            f"the query's state store provider is {current}: ckpt converts HDFS-backed and "
            "RocksDB stores only"
        )
    target = provider or provider_from
    format_from = ckpt.checkpoint_format_version
    if target == "hdfs" and format_version == 2:
        raise ConvertRefused(
            "--format-version 2: checkpoint format v2 is RocksDB's; the HDFS-backed store "
            "has only v1" + ("" if provider else " (add --provider rocksdb)")
        )
    plan = ConvertPlan(
        checkpoint=url,
        last_committed=last,
        provider_from=provider_from,
        provider=target,
        checkpoint_format_version=format_from,
        format_version=format_version or (1 if target == "hdfs" else format_from),
    )
    stores = [(op, st) for op in ckpt.operators.values() for st in op.stores.values()]
    if not plan.reframes and plan.format_version == 2 == format_from:
        plan.zip_metadata_v2 = _count_zip_metadata_v2(ckpt, stores)
    if plan.nothing_to_do:
        plan.notes.append(_nothing_to_do(plan))
        return plan
    _refuse_on_conf(ckpt, plan)
    if current is None:
        plan.notes.append(
            f"offsets/{last} pins no provider class (Spark restarts such a query with the "
            f"session's): offsets/{plan.batch} pins {target}'s"
        )
    if not stores:
        raise ConvertRefused(f"{url}: the query keeps no state: nothing to convert")
    for op, st in stores:
        _refuse_store(ckpt, plan, op, st)
    if engine is not None and engine.name != "local":
        _count_on(ckpt, plan, stores, engine, progress)
    else:
        _count_here(ckpt, plan, stores, progress)
    moved = list({f.path: f for f in old_files(ckpt, plan)}.values())
    plan.moved = [f.path for f in moved]
    plan.moved_bytes = sum(f.entry.size for f in moved)
    plan.notes.extend(_what_it_does(plan))
    return plan


def _count_here(
    ckpt: Checkpoint,
    plan: ConvertPlan,
    stores: list[tuple[Operator, Store]],
    progress: ProgressSink,
) -> None:
    parts = {(op.id, st.name): batch_partitions(ckpt, st) for op, st in stores}
    progress.start("Reading state", total=sum(len(p) for p in parts.values()))
    try:
        for op, st in stores:
            counted = StoreConversion(op.id, st.name, len(parts[op.id, st.name]))
            prefix_key = prefix_key_of(ckpt, op.id, st.name) if plan.reframes else None
            for partition in parts[op.id, st.name]:
                source = partition_source(ckpt, plan, op.id, st.name, partition, prefix_key)
                for key, value in converted_records(ckpt, plan, source):
                    counted.keys += 1
                    counted.bytes += len(key) + len(value)
                progress.advance()
            plan.stores.append(counted)
    finally:
        progress.close()


def _count_on(
    ckpt: Checkpoint,
    plan: ConvertPlan,
    stores: list[tuple[Operator, Store]],
    engine: Engine,
    progress: ProgressSink,
) -> None:
    """The counts of every store partition, one task each."""
    from ckpt_cli.convert.tasks import PartUnit, count_partitions  # they build on this module

    units = []
    for op, st in stores:
        prefix_key = prefix_key_of(ckpt, op.id, st.name) if plan.reframes else None
        units += [PartUnit(op.id, st.name, p, prefix_key) for p in batch_partitions(ckpt, st)]
    counts = count_partitions(ckpt, plan, units, engine, progress)
    by_store: dict[tuple[int, str], StoreConversion] = {}
    for op, st in stores:
        count = len(batch_partitions(ckpt, st))
        by_store[op.id, st.name] = StoreConversion(op.id, st.name, count)
        plan.stores.append(by_store[op.id, st.name])
    for unit, (keys, size) in zip(units, counts, strict=True):
        counted = by_store[unit.operator, unit.store]
        counted.keys += keys
        counted.bytes += size


def _nothing_to_do(plan: ConvertPlan) -> str:
    where = f"offsets/{plan.last_committed}, commits/{plan.last_committed}"
    if plan.provider == "hdfs":
        return f"the query already uses the hdfs provider ({where})"
    return (
        f"the query already uses the rocksdb provider and its format v{plan.format_version} "
        f"({where})"
    )


def _what_it_does(plan: ConvertPlan) -> list[str]:
    provider, old = plan.provider, plan.provider_from
    into = f"{provider} files" if plan.reframes else "new RocksDB files"
    if provider == "rocksdb":
        into += f" of checkpoint format v{plan.format_version}"
    moved = f"the {old} files" if plan.reframes else "the old RocksDB files"
    notes = [
        f"batch {plan.batch} converts the state: version {plan.version} of every partition "
        f"in {into}, offsets/{plan.batch} naming {PROVIDER_CLASSES[provider]}, "
        f"commits/{plan.batch} with a v{plan.format_version} header; {moved} move to the "
        f"quarantine, so batches before {plan.batch} can no longer be read or rolled back "
        "to (--undo brings them back)"
    ]
    if plan.checkpoint_format_version == 2 and plan.format_version == 1:
        if provider == "hdfs":
            notes.append("the HDFS-backed store has no checkpoint format v2: the query moves to v1")
        notes.append(
            "Spark 4.3 takes the format from the newest commit (it restarts in v1 whatever "
            "checkpointFormatVersion says); Spark 4.0-4.2 need "
            "spark.sql.streaming.stateStore.checkpointFormatVersion=1 set on the session"
        )
    if plan.format_version == 2 and plan.checkpoint_format_version == 1:
        notes.append(
            "Spark 4.3 takes the format from the newest commit (it restarts in v2 whatever "
            "checkpointFormatVersion says); set checkpointFormatVersion=2 on Spark 4.1 and "
            "4.2. The new zips have metadata v1, which Spark 4.0 does not read in format v2"
        )
    if plan.zip_metadata_v2:
        notes.append(
            f"{plan.zip_metadata_v2} zip(s) have Spark 4.0's metadata v2, which Spark 4.1 and "
            "later cannot read: the new zips have v1. Run the query on Spark 4.1 or later "
            "after this (Spark 4.0 reads only v2 in format v2; --format-version 1 suits both)"
        )
    if provider == "rocksdb" and plan.reframes:
        notes.append(
            "RocksDB settings that are not pinned in the offsets (changelog checkpointing, "
            "its other spark.sql.streaming.stateStore.rocksdb.* settings) are the restarted "
            "session's own: the new state is a full snapshot, read whichever they are"
        )
    return notes


def _count_zip_metadata_v2(ckpt: Checkpoint, stores: list[tuple[Operator, Store]]) -> int:
    """How many zips have metadata v2 (Spark 4.0, format v2): one read of each zip's
    metadata entry."""
    count = 0
    for _, st in stores:
        for part in st.partitions.values():
            for f in part.files:
                if f.kind is FileKind.ZIP:
                    meta = read_zip_metadata(ckpt.storage, f.path, f.entry.size)
                    count += meta.version == 2
    return count


def _provider_of_files(ckpt: Checkpoint) -> str:
    """The provider the state files are of, when the offsets do not name it."""
    found = {st.provider for op in ckpt.operators.values() for st in op.stores.values()}
    found.discard("unknown")  # a store with no files yet
    if len(found) > 1 or not found <= {"hdfs", "rocksdb"}:
        raise ConvertRefused(
            f"{ckpt.storage.url}: the state files are of {' and '.join(sorted(found))}: "
            "repair the checkpoint first",
            hint="ckpt validate CHECKPOINT says what is wrong",
        )
    return found.pop() if found else "hdfs"  # Spark's default provider


def _refuse_on_conf(ckpt: Checkpoint, plan: ConvertPlan) -> None:
    if plan.reframes and row_checksums(ckpt.offsets(plan.last_committed).conf):
        raise ConvertRefused(
            f"{ckpt.storage.url}: row checksums are on (spark.sql.streaming.stateStore."
            "rowChecksum.enabled): the providers frame them differently, and ckpt does not "
            "convert them yet"
        )


def _refuse_store(ckpt: Checkpoint, plan: ConvertPlan, op: Operator, st: Store) -> None:
    """Refuse the operators and stores the other provider cannot hold, or whose keys ckpt
    does not re-encode, by name."""
    where = f"state/{op.id}" + ("" if st.name == DEFAULT_STORE else f" store {st.name}")
    if st.provider != plan.provider_from:
        raise ConvertRefused(
            f"{where}: its files are {st.provider}'s, but offsets/{plan.last_committed} "
            f"names the {plan.provider_from} provider: repair the checkpoint first",
            hint="ckpt validate CHECKPOINT says what is wrong",
        )
    if not plan.reframes:
        return  # RocksDB to RocksDB: records move as they are
    meta = ckpt.operator_metadata(op.id)
    name = meta.operator_name if meta is not None else ""
    # Spark writes operator metadata v2 (_metadata/v2/<batch>) for transformWithState only.
    if op.metadata_v2_files or "transformWithState" in name:
        raise ConvertRefused(
            f"{where}: a transformWithState operator: its state lives in RocksDB column "
            "families, which the HDFS-backed store does not have"
            if plan.provider == "hdfs"
            else f"{where}: a transformWithState operator, which uses RocksDB already"
        )
    prefix_key_of(ckpt, op.id, st.name)  # refuses what it cannot split
    if plan.provider_from == "rocksdb":
        newest = _newest_zip(st)
        if newest is not None:
            metadata = read_zip_metadata(ckpt.storage, newest.path, newest.entry.size)
            if metadata.column_family_mapping:
                raise ConvertRefused(
                    f"{where}: its RocksDB state uses column families "
                    f"({', '.join(sorted(metadata.column_family_mapping))}; a stream-stream "
                    "join in state format 3 or later): the HDFS-backed store has none"
                )


def _newest_zip(st: Store) -> CheckpointFile | None:
    zips = [f for p in st.partitions.values() for f in p.files if f.kind is FileKind.ZIP]
    return max(zips, key=lambda f: f.version or 0, default=None)


@dataclass(frozen=True)
class PrefixKey:
    """A store whose keys Spark scans by prefix (session windows): RocksDB keeps the first
    ``columns`` of the key schema as one row and the others as another
    (``PrefixKeyScanStateEncoder``); the HDFS-backed store keeps the whole key row."""

    schema: StructType
    columns: int

    def split(self, key: bytes, path: str) -> bytes:
        """An HDFS-backed key row as RocksDB's prefix-scan key."""
        n = len(self.schema.fields)
        prefix = project_fields(
            [(key, self.schema)], [(0, i) for i in range(self.columns)], path=path
        )
        rest = project_fields(
            [(key, self.schema)], [(0, i) for i in range(self.columns, n)], path=path
        )
        return encode_prefix_scan_key(prefix, rest)

    def join(self, key: bytes, path: str) -> bytes:
        """RocksDB's prefix-scan key as the HDFS-backed store's key row."""
        prefix, rest = split_prefix_scan_key(key, path=path)
        fields = self.schema.fields
        rows = [
            (prefix, StructType(fields[: self.columns])),
            (rest, StructType(fields[self.columns :])),
        ]
        picks = [(0, i) for i in range(self.columns)]
        picks += [(1, i) for i in range(len(fields) - self.columns)]
        return project_fields(rows, picks, path=path)


def prefix_key_of(ckpt: Checkpoint, operator: int, store: str) -> PrefixKey | None:
    """The prefix-scan layout of a store's keys (``numColsPrefixKey`` in its operator
    metadata), None when it has none; refused where ckpt cannot split its keys."""
    where = f"state/{operator}" + ("" if store == DEFAULT_STORE else f" store {store}")
    meta = ckpt.operator_metadata(operator)
    schema = store_schema(ckpt, operator, store)
    columns = next((c for name, c, _ in meta.stores if name == store), 0) if meta else 0
    if columns <= 0:
        if (
            meta is None
            and schema is not None
            and schema.key.fields[-1:]
            and (schema.key.fields[-1].name == "sessionStartTime")
        ):
            raise ConvertRefused(
                f"{where}: session windows without operator metadata (Spark < 4.0): nothing "
                "says which key columns RocksDB scans by"
            )
        return None
    if schema is None or not 0 < columns < len(schema.key.fields):
        raise ConvertRefused(
            f"{where}: its keys are scanned by their first {columns} columns, and no schema "
            "file says what its key columns are"
        )
    return PrefixKey(schema.key, columns)


@dataclass(frozen=True)
class PartitionSource:
    """Where one partition's state at batch N comes from (``plan``: version N+1); when
    records stay in RocksDB, the metadata its new zip takes after (``template``: the base
    zip's column families, with header ``v1``); when they change provider, how their keys
    are scanned (``prefix_key``)."""

    plan: ReplayPlan
    template: RocksDBCheckpointMetadata | None = None
    prefix_key: PrefixKey | None = None


def partition_source(
    ckpt: Checkpoint,
    plan: ConvertPlan,
    operator: int,
    store: str,
    partition: int,
    prefix_key: PrefixKey | None = None,
) -> PartitionSource:
    version_plan = plan_version(ckpt, operator, partition, plan.last_committed + 1, store=store)
    if plan.reframes:
        return PartitionSource(version_plan, prefix_key=prefix_key)
    base = version_plan.base
    if base is not None and base.kind is FileKind.ZIP:
        meta = read_zip_metadata(ckpt.storage, base.path, base.entry.size)
        return PartitionSource(version_plan, replace(meta, version=1))
    if any(read_changelog_header(ckpt, f).format_version in (2, 4) for f in version_plan.steps):
        raise ConvertRefused(
            f"{version_plan.path}: its state uses column families and no zip names them yet "
            "(changelogs only, from version 1): ckpt cannot write their mapping; let the query "
            "write a snapshot first"
        )
    return PartitionSource(version_plan)


def converted_records(
    ckpt: Checkpoint, plan: ConvertPlan, source: PartitionSource
) -> Iterator[tuple[bytes, bytes]]:
    """The records of one partition at batch N (version N+1), framed for ``plan.provider``."""
    version_plan = source.plan
    if not plan.reframes:
        yield from iter_state(ckpt, version_plan)
        return
    path = version_plan.path
    prefix = source.prefix_key
    if plan.provider == "rocksdb":
        for key, value in iter_state(ckpt, version_plan):
            new_key = prefix.split(key, path) if prefix else ENCODING_VERSION + key
            # Spark < 2.3 appended 4 bytes to HDFS values; readers drop them (size & ~7).
            yield new_key, ENCODING_VERSION + value[: len(value) & ~7]
        return
    for key, value in iter_state(ckpt, version_plan):
        if value[:1] != ENCODING_VERSION or (prefix is None and key[:1] != ENCODING_VERSION):
            raise FormatError(
                path,
                "a RocksDB record without the encoding version byte 0: not a state ckpt converts",
            )
        yield (prefix.join(key, path) if prefix else key[1:]), value[1:]


def old_files(ckpt: Checkpoint, plan: ConvertPlan) -> Iterator[CheckpointFile]:
    """The old provider's files of every partition (all RocksDB's files when it stays) with
    their checksum sidecars, newest version first, the shared SSTs and logs last: moved in
    this order, a restart of the old provider part way fails on the missing newest version
    rather than load an older one."""
    kinds = PROVIDER_KINDS[plan.provider_from]
    for op in ckpt.operators.values():
        for st in op.stores.values():
            for part in st.partitions.values():
                files = [f for f in part.files if f.kind in kinds]
                files.sort(key=lambda f: (f.version is None, -(f.version or 0), f.path))
                for f in files:
                    yield f
                    # Spark's <name>.crc has Hadoop's .<name>.crc.crc beside it.
                    for sidecar in ckpt.sidecars_of(f.path):
                        yield sidecar
                        yield from ckpt.sidecars_of(sidecar.path)
