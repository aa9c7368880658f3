"""One model of a checkpoint that every command reads.

:meth:`Checkpoint.open` lists the checkpoint once and classifies every file: metadata logs,
state store files by operator / store / partition / version, the shared RocksDB files,
and everything else (temp files of interrupted writes, checksum sidecars, unknown files).
Contents are read lazily: the small log files on first use, state files never (that is the
job of the readers in :mod:`ckpt_cli.formats`).

Versions are *state store versions*: after batch N commits, each store is at version N+1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import Any

from ckpt_cli.errors import CkptError, NotACheckpoint
from ckpt_cli.formats import logs
from ckpt_cli.formats.names import (
    StateFileType,
    parse_batch_name,
    parse_compact_name,
    parse_hadoop_crc_name,
    parse_spark_checksum_name,
    parse_state_file_name,
    parse_temp_name,
)
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.storage import FileEntry, Listing, Storage

DEFAULT_STORE = "default"
# Stream-stream join stores, in the order of the commit log's stateUniqueIds inner arrays.
JOIN_STORES = (
    "left-keyToNumValues",
    "left-keyWithIndexToValue",
    "right-keyToNumValues",
    "right-keyWithIndexToValue",
)
# Directories inside a store directory that are not named stores.
_STORE_SUBDIRS = frozenset({"SSTs", "logs", "_metadata"})


class FileKind(str, Enum):
    """What a file in the checkpoint is."""

    METADATA = "metadata"
    OFFSETS = "offsets"
    COMMIT = "commit"
    SOURCE_LOG = "source_log"
    OPERATOR_METADATA = "operator_metadata"
    STATE_SCHEMA = "state_schema"
    DELTA = "delta"
    SNAPSHOT = "snapshot"
    ZIP = "zip"
    CHANGELOG = "changelog"
    SST = "sst"
    ROCKSDB_LOG = "rocksdb_log"
    TEMP = "temp"
    HADOOP_CRC = "hadoop_crc"
    SPARK_CHECKSUM = "spark_checksum"
    UNKNOWN = "unknown"


_STATE_KINDS = {
    StateFileType.DELTA: FileKind.DELTA,
    StateFileType.SNAPSHOT: FileKind.SNAPSHOT,
    StateFileType.ZIP: FileKind.ZIP,
    StateFileType.CHANGELOG: FileKind.CHANGELOG,
}


@dataclass(frozen=True, slots=True)
class StoreLocation:
    operator: int
    partition: int
    store: str


@dataclass(frozen=True, slots=True)
class CheckpointFile:
    """A listed file and what it is.

    ``batch`` is set for log entries, ``version``/``unique_id`` for state files, ``store`` for
    anything inside a store directory, ``target`` for temp files (the final path the write was
    meant to produce) and checksum sidecars (the file they cover).
    """

    entry: FileEntry
    kind: FileKind
    store: StoreLocation | None = None
    operator: int | None = None
    batch: int | None = None
    version: int | None = None
    unique_id: str | None = None
    target: str | None = None

    @property
    def path(self) -> str:
        return self.entry.path


@dataclass
class StoreVersion:
    """The files of one state store version (several with format v2 retries)."""

    version: int
    files: list[CheckpointFile] = field(default_factory=list)

    def of_kind(self, kind: FileKind) -> list[CheckpointFile]:
        return [f for f in self.files if f.kind is kind]

    @property
    def is_snapshot(self) -> bool:
        """A full copy of the state exists at this version (HDFS .snapshot or RocksDB .zip)."""
        return any(f.kind in (FileKind.SNAPSHOT, FileKind.ZIP) for f in self.files)

    @property
    def unique_ids(self) -> list[str]:
        return sorted({f.unique_id for f in self.files if f.unique_id is not None})


@dataclass
class Partition:
    """One partition of one store: ``state/<op>/<partition>[/<store>]``."""

    id: int
    path: str
    versions: dict[int, StoreVersion] = field(default_factory=dict)
    files: list[CheckpointFile] = field(default_factory=list)  # everything in the directory

    @property
    def version_ids(self) -> list[int]:
        return sorted(self.versions)

    @property
    def snapshot_versions(self) -> list[int]:
        return [v for v in self.version_ids if self.versions[v].is_snapshot]

    @property
    def shared_files(self) -> list[CheckpointFile]:
        """RocksDB files shared between versions (``SSTs/``, ``logs/``)."""
        return [f for f in self.files if f.kind in (FileKind.SST, FileKind.ROCKSDB_LOG)]

    @property
    def bytes(self) -> int:
        return sum(f.entry.size for f in self.files)


@dataclass
class Store:
    name: str
    partitions: dict[int, Partition] = field(default_factory=dict)
    schema_files: list[CheckpointFile] = field(default_factory=list)
    configured_provider: str | None = None

    @property
    def provider(self) -> str:
        """hdfs or rocksdb, inferred from the files; the offsets conf when there are none."""
        kinds = {f.kind for p in self.partitions.values() for f in p.files}
        hdfs = bool(kinds & {FileKind.DELTA, FileKind.SNAPSHOT})
        rocksdb = bool(kinds & {FileKind.ZIP, FileKind.CHANGELOG, FileKind.SST})
        if hdfs and rocksdb:
            return "mixed"
        if hdfs:
            return "hdfs"
        if rocksdb:
            return "rocksdb"
        return self.configured_provider or "unknown"


@dataclass
class Operator:
    id: int
    path: str
    stores: dict[str, Store] = field(default_factory=dict)
    metadata_files: list[CheckpointFile] = field(default_factory=list)
    schema_files: list[CheckpointFile] = field(default_factory=list)  # _stateSchema/ (v3)
    other_files: list[CheckpointFile] = field(default_factory=list)


@dataclass(frozen=True)
class Batches:
    """What the offsets and commit logs say about batches."""

    offsets: tuple[int, ...]
    commits: tuple[int, ...]

    @property
    def latest_offsets(self) -> int | None:
        return self.offsets[-1] if self.offsets else None

    @property
    def latest_committed(self) -> int | None:
        return self.commits[-1] if self.commits else None

    @property
    def in_flight(self) -> tuple[int, ...]:
        """Batches with offsets written after the latest commit (Spark re-runs the last)."""
        last = self.latest_committed
        return tuple(b for b in self.offsets if last is None or b > last)

    @property
    def offsets_gaps(self) -> tuple[int, ...]:
        return _gaps(self.offsets)

    @property
    def commits_gaps(self) -> tuple[int, ...]:
        return _gaps(self.commits)

    @property
    def commits_without_offsets(self) -> tuple[int, ...]:
        offsets = set(self.offsets)
        return tuple(b for b in self.commits if b not in offsets)


def _gaps(ids: tuple[int, ...]) -> tuple[int, ...]:
    if not ids:
        return ()
    present = set(ids)
    return tuple(b for b in range(ids[0], ids[-1] + 1) if b not in present)


def classify(entry: FileEntry) -> CheckpointFile:
    """Say what one listed file is, from its checkpoint-relative path alone."""
    parts = entry.path.split("/")
    name = parts[-1]
    top = parts[0]
    location = _store_location(parts)
    operator = location.operator if location else _operator_of(parts)

    def make(kind: FileKind, **kw: Any) -> CheckpointFile:
        return CheckpointFile(entry, kind, store=location, operator=operator, **kw)

    parent = entry.parent + "/" if entry.parent else ""
    final = parse_temp_name(name)
    if final is not None:
        return make(FileKind.TEMP, target=parent + final)
    covered = parse_hadoop_crc_name(name)
    if covered is not None:
        return make(FileKind.HADOOP_CRC, target=parent + covered)

    if len(parts) == 1:
        return make(FileKind.METADATA if name == "metadata" else FileKind.UNKNOWN)
    if top in ("offsets", "commits") and len(parts) == 2:
        batch = parse_batch_name(name)
        if batch is None:
            return make(FileKind.UNKNOWN)
        return make(FileKind.OFFSETS if top == "offsets" else FileKind.COMMIT, batch=batch)
    if top == "sources":
        # Source logs are the source's own business (file source log, Kafka initial offsets).
        batch = parse_batch_name(name)
        return make(
            FileKind.SOURCE_LOG, batch=batch if batch is not None else parse_compact_name(name)
        )
    if top != "state" or operator is None:
        return make(FileKind.UNKNOWN)
    if location is None:
        if len(parts) >= 4 and parts[2] == "_metadata":
            return make(FileKind.OPERATOR_METADATA)
        if len(parts) >= 4 and parts[2] == "_stateSchema":
            return make(FileKind.STATE_SCHEMA)
        return make(FileKind.UNKNOWN)

    sub = parts[4:] if location.store != DEFAULT_STORE else parts[3:]
    if len(sub) == 1:
        state = parse_state_file_name(name)
        if state is not None:
            return make(_STATE_KINDS[state.type], version=state.version, unique_id=state.unique_id)
        covered_state = parse_spark_checksum_name(name)
        if covered_state is not None:
            return make(
                FileKind.SPARK_CHECKSUM,
                version=covered_state.version,
                unique_id=covered_state.unique_id,
                target=parent + name[:-4],
            )
    elif len(sub) == 2:
        if sub[0] == "SSTs" and name.endswith(".sst"):
            return make(FileKind.SST)
        if sub[0] == "logs" and name.endswith(".log"):
            return make(FileKind.ROCKSDB_LOG)
        if sub[0] == "_metadata" and name == "schema":
            return make(FileKind.STATE_SCHEMA)
    return make(FileKind.UNKNOWN)


def _operator_of(parts: list[str]) -> int | None:
    if len(parts) >= 3 and parts[0] == "state" and parts[1].isdigit():
        return int(parts[1])
    return None


def _store_location(parts: list[str]) -> StoreLocation | None:
    # state/<op>/<partition>/<file>                   -> default store
    # state/<op>/<partition>/{SSTs,logs,_metadata}/.. -> default store
    # state/<op>/<partition>/<store>/...              -> named store (e.g. join stores)
    if len(parts) < 4 or parts[0] != "state" or not parts[1].isdigit() or not parts[2].isdigit():
        return None
    store = DEFAULT_STORE if len(parts) == 4 or parts[3] in _STORE_SUBDIRS else parts[3]
    return StoreLocation(int(parts[1]), int(parts[2]), store)


class Checkpoint:
    """A streaming query's checkpoint, as found in one listing.

    Build it with :meth:`open`. Log contents are parsed on first use and cached; they raise
    :class:`~ckpt_cli.errors.FormatError` naming the file when Spark could not read it either.
    """

    def __init__(self, storage: Storage, listing: Listing) -> None:
        self.storage = storage
        self.listing = listing
        self.files: list[CheckpointFile] = [classify(e) for e in listing]
        self._offsets_cache: dict[int, logs.OffsetSeq] = {}
        self._commit_cache: dict[int, logs.CommitMetadata] = {}
        self._check_is_checkpoint()

    @classmethod
    def open(
        cls,
        location: str | Storage,
        storage_options: Mapping[str, Any] | None = None,
        progress: ProgressSink = NULL_PROGRESS,
    ) -> Checkpoint:
        """List ``location`` once and build the model. Raises a CkptError on bad input."""
        storage = (
            location
            if isinstance(location, Storage)
            else Storage.from_url(location, storage_options)
        )
        return cls(storage, storage.list_all(progress))

    def _check_is_checkpoint(self) -> None:
        if not self.files:
            raise NotACheckpoint(
                f"{self.storage.url}: directory is empty, not a checkpoint",
                hint="pass the checkpointLocation of a query that has started at least once",
            )
        known = {FileKind.METADATA, FileKind.OFFSETS, FileKind.COMMIT}
        has_state = any(f.store is not None for f in self.files)
        if not has_state and not any(f.kind in known for f in self.files):
            raise NotACheckpoint(
                f"{self.storage.url}: not a Spark checkpoint "
                f"(no metadata file, offsets/, commits/ or state/ among {len(self.files)} files)",
                hint="pass the checkpointLocation directory of a streaming query",
            )

    # -- files by kind -------------------------------------------------------------------

    def of_kind(self, *kinds: FileKind) -> list[CheckpointFile]:
        wanted = set(kinds)
        return [f for f in self.files if f.kind in wanted]

    @cached_property
    def metadata_file(self) -> CheckpointFile | None:
        found = self.of_kind(FileKind.METADATA)
        return found[0] if found else None

    # -- logs ----------------------------------------------------------------------------

    @cached_property
    def batches(self) -> Batches:
        return Batches(
            offsets=tuple(
                sorted(f.batch for f in self.of_kind(FileKind.OFFSETS) if f.batch is not None)
            ),
            commits=tuple(
                sorted(f.batch for f in self.of_kind(FileKind.COMMIT) if f.batch is not None)
            ),
        )

    @cached_property
    def query_id(self) -> str | None:
        """The query id from ``metadata`` (None if the file is missing)."""
        if self.metadata_file is None:
            return None
        data = self.storage.read_bytes(self.metadata_file.path)
        return logs.parse_stream_metadata("metadata", data).query_id

    def offsets(self, batch: int) -> logs.OffsetSeq:
        """Parse ``offsets/<batch>`` (which must be in the listing)."""
        if batch not in self._offsets_cache:
            path = f"offsets/{batch}"
            self._require(path)
            self._offsets_cache[batch] = logs.parse_offsets(
                path, batch, self.storage.read_bytes(path)
            )
        return self._offsets_cache[batch]

    def commit(self, batch: int) -> logs.CommitMetadata:
        """Parse ``commits/<batch>`` (which must be in the listing)."""
        if batch not in self._commit_cache:
            path = f"commits/{batch}"
            self._require(path)
            self._commit_cache[batch] = logs.parse_commit(
                path, batch, self.storage.read_bytes(path)
            )
        return self._commit_cache[batch]

    def _require(self, path: str) -> None:
        if self.listing.get(path) is None:
            raise CkptError(f"{path}: not in the checkpoint")

    @cached_property
    def latest_offsets(self) -> logs.OffsetSeq | None:
        latest = self.batches.latest_offsets
        return None if latest is None else self.offsets(latest)

    @cached_property
    def latest_commit(self) -> logs.CommitMetadata | None:
        latest = self.batches.latest_committed
        return None if latest is None else self.commit(latest)

    @property
    def conf(self) -> dict[str, str]:
        """The SQL confs pinned to the query, from the latest offsets entry."""
        return dict(self.latest_offsets.conf) if self.latest_offsets else {}

    @property
    def configured_provider(self) -> str | None:
        cls = self.conf.get(logs.PROVIDER_CLASS)
        if cls is None:
            # Spark's default provider; only meaningful when the query has offsets at all.
            return "hdfs" if self.latest_offsets is not None else None
        if "RocksDB" in cls:
            return "rocksdb"
        if "HDFSBacked" in cls:
            return "hdfs"
        return cls

    @property
    def checkpoint_format_version(self) -> int:
        """1 or 2: the commit log header is authoritative (it pins the format), then the conf."""
        if self.latest_commit is not None:
            return self.latest_commit.log_version
        value = self.conf.get(logs.CHECKPOINT_FORMAT_VERSION, "1")
        return int(value) if value.isdigit() else 1

    # -- state ---------------------------------------------------------------------------

    @cached_property
    def operators(self) -> dict[int, Operator]:
        operators: dict[int, Operator] = {}
        for f in self.files:
            if f.operator is None:
                continue
            op = operators.get(f.operator)
            if op is None:
                op = operators[f.operator] = Operator(f.operator, f"state/{f.operator}")
            if f.store is None:
                if f.kind is FileKind.OPERATOR_METADATA:
                    op.metadata_files.append(f)
                elif f.kind is FileKind.STATE_SCHEMA:
                    op.schema_files.append(f)
                else:
                    op.other_files.append(f)
                continue
            store = op.stores.get(f.store.store)
            if store is None:
                store = op.stores[f.store.store] = Store(f.store.store)
            partition = store.partitions.get(f.store.partition)
            if partition is None:
                path = f"state/{f.operator}/{f.store.partition}"
                if f.store.store != DEFAULT_STORE:
                    path += f"/{f.store.store}"
                partition = store.partitions[f.store.partition] = Partition(f.store.partition, path)
            partition.files.append(f)
            if f.version is not None and f.kind in _STATE_KINDS.values():
                sv = partition.versions.get(f.version)
                if sv is None:
                    sv = partition.versions[f.version] = StoreVersion(f.version)
                sv.files.append(f)
            elif f.kind is FileKind.STATE_SCHEMA:
                store.schema_files.append(f)
        provider = self.configured_provider
        for op in operators.values():
            op.stores = _sorted_stores(op.stores)
            for store in op.stores.values():
                store.configured_provider = provider
                store.partitions = dict(sorted(store.partitions.items()))
                for part in store.partitions.values():
                    part.versions = dict(sorted(part.versions.items()))
        return dict(sorted(operators.items()))

    def operator_metadata(self, operator: int) -> logs.OperatorMetadata | None:
        """The v1 operator metadata of ``operator`` (Spark 4.0+), if present."""
        path = f"state/{operator}/_metadata/metadata"
        if self.listing.get(path) is None:
            return None
        return logs.parse_operator_metadata(path, self.storage.read_bytes(path))

    # -- everything else -----------------------------------------------------------------

    @property
    def temp_files(self) -> list[CheckpointFile]:
        return self.of_kind(FileKind.TEMP)

    @property
    def unknown_files(self) -> list[CheckpointFile]:
        return self.of_kind(FileKind.UNKNOWN)

    def count_by_kind(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for f in self.files:
            counts[f.kind.value] = counts.get(f.kind.value, 0) + 1
        return dict(sorted(counts.items()))


def _sorted_stores(stores: dict[str, Store]) -> dict[str, Store]:
    def key(name: str) -> tuple[int, str]:
        if name == DEFAULT_STORE:
            return (0, name)
        if name in JOIN_STORES:
            return (1 + JOIN_STORES.index(name), name)
        return (10, name)

    return {name: stores[name] for name in sorted(stores, key=key)}


def iter_partitions(
    checkpoint: Checkpoint,
    operators: Iterable[int] | None = None,
    partitions: Iterable[int] | None = None,
) -> list[tuple[Operator, Store, Partition]]:
    """Every (operator, store, partition), optionally filtered."""
    ops = set(operators) if operators is not None else None
    parts = set(partitions) if partitions is not None else None
    return [
        (op, store, part)
        for op in checkpoint.operators.values()
        if ops is None or op.id in ops
        for store in op.stores.values()
        for part in store.partitions.values()
        if parts is None or part.id in parts
    ]
