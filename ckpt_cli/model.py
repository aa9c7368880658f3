"""One model of a checkpoint that every command reads.

:meth:`Checkpoint.open` lists the checkpoint once and classifies every file: metadata logs,
state store files by operator / store / partition / version, the shared RocksDB files,
and everything else (temp files of interrupted writes, checksum sidecars, unknown files).
Contents are read lazily: the small log files on first use, state files never (that is the
job of the readers in :mod:`ckpt_cli.formats`).

Versions are *state store versions*: after batch N commits, each store is at version N+1.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import Any, NamedTuple, TypeVar

from ckpt_cli.errors import CkptError, FormatError, NotACheckpoint
from ckpt_cli.formats import logs
from ckpt_cli.formats.names import (
    CKPT_LOCK_NAME,
    StateFileType,
    parse_batch_name,
    parse_compact_name,
    parse_hadoop_crc_name,
    parse_spark_checksum_name,
    parse_state_file_name,
    parse_temp_name,
)
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.storage import FileEntry, Listing, Storage, StorageStats

_T = TypeVar("_T")

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
    CKPT_LOCK = "ckpt_lock"  # ckpt's own lock file (.ckpt-lock at the root); Spark ignores it
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


class CheckpointFile(NamedTuple):
    """A listed file and what it is.

    ``batch`` is set for log entries, ``version``/``unique_id`` for state files, ``store`` for
    anything inside a store directory, ``target`` for temp files (the final path the write was
    meant to produce) and checksum sidecars (the file they cover). A NamedTuple because there
    is one per listed file.
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
        return any(f.kind in _SNAPSHOT_KINDS for f in self.files)

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

    @cached_property
    def provider(self) -> str:
        """hdfs or rocksdb, inferred from the files; the offsets conf when there are none.

        Cached: read once per planned version, and the model is complete when it is read.
        """
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


@dataclass(frozen=True, slots=True)
class _Dir:
    """What a directory of the checkpoint is; worked out once and shared by its files."""

    prefix: str  # "<dir>/" ("" for the root)
    role: str  # root, offsets, commits, sources, operator_metadata, operator_schema, store,
    # SSTs, logs, _metadata (store subdirectories) or other
    location: StoreLocation | None
    operator: int | None


def _dir_of(parent: str) -> _Dir:
    prefix = parent + "/" if parent else ""
    if not parent:
        return _Dir(prefix, "root", None, None)
    parts = parent.split("/")
    top = parts[0]
    if top in ("offsets", "commits") and len(parts) == 1:
        return _Dir(prefix, top, None, None)
    if top == "sources":
        return _Dir(prefix, "sources", None, None)
    if top != "state" or len(parts) < 2 or not parts[1].isdigit():
        return _Dir(prefix, "other", None, None)
    operator = int(parts[1])
    if len(parts) == 2:
        return _Dir(prefix, "other", None, operator)
    if parts[2] == "_metadata":
        return _Dir(prefix, "operator_metadata", None, operator)
    if parts[2] == "_stateSchema":
        return _Dir(prefix, "operator_schema", None, operator)
    if not parts[2].isdigit():
        return _Dir(prefix, "other", None, operator)
    # state/<op>/<partition>                       -> default store
    # state/<op>/<partition>/{SSTs,logs,_metadata} -> default store's subdirectories
    # state/<op>/<partition>/<store>[/...]         -> a named store (e.g. the join stores)
    rest = parts[3:]
    store = DEFAULT_STORE
    if rest and rest[0] not in _STORE_SUBDIRS:
        store = rest[0]
        rest = rest[1:]
    location = StoreLocation(operator, int(parts[2]), store)
    if not rest:
        return _Dir(prefix, "store", location, operator)
    if len(rest) == 1 and rest[0] in _STORE_SUBDIRS:
        return _Dir(prefix, rest[0], location, operator)
    return _Dir(prefix, "other", location, operator)


def classify(entry: FileEntry, dirs: dict[str, _Dir] | None = None) -> CheckpointFile:
    """Say what one listed file is, from its checkpoint-relative path alone.

    ``dirs`` caches directory contexts across calls (a listing has few directories).
    """
    path = entry.path
    cut = path.rfind("/")
    parent, name = (path[:cut], path[cut + 1 :]) if cut >= 0 else ("", path)
    d = dirs.get(parent) if dirs is not None else None
    if d is None:
        d = _dir_of(parent)
        if dirs is not None:
            dirs[parent] = d
    loc, op = d.location, d.operator

    if name.startswith("."):
        final = parse_temp_name(name) if name.endswith(".tmp") else None
        if final is not None:
            return CheckpointFile(entry, _TEMP, loc, op, target=d.prefix + final)
        covered = parse_hadoop_crc_name(name)
        if covered is not None:
            return CheckpointFile(entry, _HADOOP_CRC, loc, op, target=d.prefix + covered)
        if name == CKPT_LOCK_NAME and not parent:
            return CheckpointFile(entry, FileKind.CKPT_LOCK)
        return CheckpointFile(entry, _UNKNOWN, loc, op)

    role = d.role
    if role == "store":
        state = parse_state_file_name(name)
        if state is not None:
            return CheckpointFile(
                entry,
                _STATE_KINDS[state.type],
                loc,
                op,
                version=state.version,
                unique_id=state.unique_id,
            )
        covered_state = parse_spark_checksum_name(name)
        if covered_state is not None:
            return CheckpointFile(
                entry,
                _SPARK_CHECKSUM,
                loc,
                op,
                version=covered_state.version,
                unique_id=covered_state.unique_id,
                target=d.prefix + name[:-4],
            )
    elif role == "SSTs":
        if name.endswith(".sst"):
            return CheckpointFile(entry, _SST, loc, op)
    elif role == "logs":
        if name.endswith(".log"):
            return CheckpointFile(entry, _ROCKSDB_LOG, loc, op)
    elif role == "_metadata":
        if name == "schema":
            return CheckpointFile(entry, _STATE_SCHEMA, loc, op)
    elif role in ("offsets", "commits"):
        batch = parse_batch_name(name)
        if batch is not None:
            kind = _OFFSETS if role == "offsets" else _COMMIT
            return CheckpointFile(entry, kind, batch=batch)
    elif role == "root":
        if name == "metadata":
            return CheckpointFile(entry, _METADATA)
    elif role == "sources":
        # Source logs are the source's own business (file source log, Kafka initial offsets).
        batch = parse_batch_name(name)
        if batch is None:
            batch = parse_compact_name(name)
        return CheckpointFile(entry, _SOURCE_LOG, batch=batch)
    elif role == "operator_metadata":
        return CheckpointFile(entry, _OPERATOR_METADATA, None, op)
    elif role == "operator_schema":
        return CheckpointFile(entry, _STATE_SCHEMA, None, op)
    return CheckpointFile(entry, _UNKNOWN, loc, op)


# Plain module constants: Enum member lookups are slow in the per-file hot loop.
_METADATA, _OFFSETS, _COMMIT, _SOURCE_LOG = (
    FileKind.METADATA,
    FileKind.OFFSETS,
    FileKind.COMMIT,
    FileKind.SOURCE_LOG,
)
_OPERATOR_METADATA, _STATE_SCHEMA = FileKind.OPERATOR_METADATA, FileKind.STATE_SCHEMA
_SST, _ROCKSDB_LOG, _TEMP = FileKind.SST, FileKind.ROCKSDB_LOG, FileKind.TEMP
_HADOOP_CRC, _SPARK_CHECKSUM, _UNKNOWN = (
    FileKind.HADOOP_CRC,
    FileKind.SPARK_CHECKSUM,
    FileKind.UNKNOWN,
)
_VERSIONED_KINDS = frozenset(_STATE_KINDS.values())
_SNAPSHOT_KINDS = frozenset({FileKind.SNAPSHOT, FileKind.ZIP})


class Checkpoint:
    """A streaming query's checkpoint, as found in one listing.

    Build it with :meth:`open`. Log contents are parsed on first use and cached; they raise
    :class:`~ckpt_cli.errors.FormatError` naming the file when Spark could not read it either.
    """

    def __init__(self, storage: Storage, listing: Listing) -> None:
        self.storage = storage
        self.listing = listing
        storage.use_listing(listing)  # sizes for reads without HEADs
        dirs: dict[str, _Dir] = {}
        self.files: list[CheckpointFile] = [classify(e, dirs) for e in listing]
        # Validation reads a damaged checkpoint as far as it can: an unreadable latest log
        # entry is then a finding, and confs come from the newest readable one.
        self.tolerant = False
        self._offsets_cache: dict[int, logs.OffsetSeq] = {}
        self._commit_cache: dict[int, logs.CommitMetadata] = {}
        self._check_is_checkpoint()

    @classmethod
    def open(
        cls,
        location: str | Storage,
        storage_options: Mapping[str, Any] | None = None,
        progress: ProgressSink = NULL_PROGRESS,
        stats: StorageStats | None = None,
    ) -> Checkpoint:
        """List ``location`` once and build the model, counting requests in ``stats`` when
        given. Raises a CkptError on bad input."""
        storage = (
            location
            if isinstance(location, Storage)
            else Storage.from_url(location, storage_options, stats)
        )
        return cls(storage, storage.list_all(progress))

    def _check_is_checkpoint(self) -> None:
        # ckpt's own lock (taken before listing by cleanup/repair --apply) does not count.
        if all(f.kind is FileKind.CKPT_LOCK for f in self.files):
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
        """The newest offsets entry. Raises FormatError when it is unreadable, unless the
        checkpoint is ``tolerant`` (validation), which takes the newest readable one."""
        return self._newest(self.batches.offsets, self.offsets)

    @cached_property
    def latest_commit(self) -> logs.CommitMetadata | None:
        return self._newest(self.batches.commits, self.commit)

    def _newest(self, batches: tuple[int, ...], read: Callable[[int], _T]) -> _T | None:
        for batch in reversed(batches):
            try:
                return read(batch)
            except FormatError:
                if not self.tolerant:
                    raise
        return None

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
            if f.version is not None and f.kind in _VERSIONED_KINDS:
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
        counts = Counter(f.kind for f in self.files)
        return dict(sorted((kind.value, n) for kind, n in counts.items()))


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
