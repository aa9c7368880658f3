"""One model of a checkpoint that every command reads.

:meth:`Checkpoint.open` lists the checkpoint once, classifies every file
(:mod:`ckpt_cli.core.layout`) and groups them: metadata logs, state store files by operator /
store / partition / version, the shared RocksDB files, and everything else (temp files of
interrupted writes, checksum sidecars, unknown files).
Contents are read lazily: the small log files on first use, state files never (that is the
job of the readers in :mod:`ckpt_cli.formats`).

Versions are *state store versions*: after batch N commits, each store is at version N+1.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from operator import attrgetter
from typing import Any, TypeVar

from ckpt_cli.core.layout import (
    DEFAULT_STORE,
    STATE_FILE_KINDS,
    CheckpointFile,
    FileKind,
    StoreLocation,
    classify_listing,
)
from ckpt_cli.errors import CkptError, FormatError, NotACheckpoint
from ckpt_cli.formats import logs
from ckpt_cli.formats.names import hadoop_crc_name
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.storage import Listing, Storage, StorageStats
from ckpt_cli.storage.listing import collector_paused, freeze_if_large

__all__ = [
    "DEFAULT_STORE",
    "JOIN_STORES",
    "Batches",
    "Checkpoint",
    "CheckpointFile",
    "FileKind",
    "Operator",
    "Partition",
    "Store",
    "StoreVersion",
]

_T = TypeVar("_T")

# Stream-stream join stores, in the order of the commit log's stateUniqueIds inner arrays.
JOIN_STORES = (
    "left-keyToNumValues",
    "left-keyWithIndexToValue",
    "right-keyToNumValues",
    "right-keyWithIndexToValue",
)
# Files that make a state store version, and those that hold all of its state.
VERSIONED_KINDS = frozenset(STATE_FILE_KINDS.values())
SNAPSHOT_KINDS = frozenset({FileKind.SNAPSHOT, FileKind.ZIP})
# RocksDB files shared between versions.
SHARED_KINDS = frozenset({FileKind.SST, FileKind.ROCKSDB_LOG})
# Checksum sidecars: Hadoop's ``.<name>.crc`` and Spark 4's ``<state file>.crc``.
CHECKSUM_KINDS = (FileKind.HADOOP_CRC, FileKind.SPARK_CHECKSUM)


@dataclass(slots=True)
class StoreVersion:
    """The files of one state store version (several with format v2 retries)."""

    version: int
    files: list[CheckpointFile] = field(default_factory=list)

    def of_kind(self, kind: FileKind) -> list[CheckpointFile]:
        return [f for f in self.files if f.kind is kind]

    @property
    def is_snapshot(self) -> bool:
        """A full copy of the state exists at this version (HDFS .snapshot or RocksDB .zip)."""
        return any(f.kind in SNAPSHOT_KINDS for f in self.files)

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

    # Over the directory's files at once, not a call per version: 100,000s of files.
    @cached_property
    def snapshot_versions(self) -> list[int]:
        """The versions with a full copy of the state (.snapshot or .zip), ascending."""
        return sorted(
            {f.version for f in self.files if f.kind in SNAPSHOT_KINDS and f.version is not None}
        )

    @cached_property
    def unique_ids(self) -> dict[int, list[str]]:
        """Checkpoint format v2: per version that has them (ascending), the uniqueIds of its
        files, sorted (several after retries)."""
        ids: dict[int, set[str]] = {}
        for f in self.files:
            if f.unique_id is not None and f.version is not None and f.kind in VERSIONED_KINDS:
                ids.setdefault(f.version, set()).add(f.unique_id)
        return {v: sorted(ids[v]) for v in sorted(ids)}

    @property
    def shared_files(self) -> list[CheckpointFile]:
        """RocksDB files shared between versions (``SSTs/``, ``logs/``)."""
        return [f for f in self.files if f.kind in SHARED_KINDS]

    @property
    def bytes(self) -> int:
        return sum([f.entry.size for f in self.files])


@dataclass
class Store:
    name: str
    partitions: dict[int, Partition] = field(default_factory=dict)
    schema_files: list[CheckpointFile] = field(default_factory=list)
    configured_provider: str | None = None

    @cached_property
    def _providers(self) -> tuple[bool, bool]:
        """Whether the store holds HDFS-backed files, and RocksDB files.

        Cached: read once per planned version, and the model is complete when it is read.
        """
        kinds: set[FileKind] = set()
        for p in self.partitions.values():
            kinds.update(map(_kind, p.files))  # C-level: every file of the store is looked at
        hdfs = bool(kinds & {FileKind.DELTA, FileKind.SNAPSHOT})
        return hdfs, bool(kinds & {FileKind.ZIP, FileKind.CHANGELOG, FileKind.SST})

    @property
    def other_provider_files(self) -> bool:
        """Files of a provider other than the offsets conf's (as well as its own, or only):
        an interrupted conversion."""
        hdfs, rocksdb = self._providers
        return (hdfs and self.configured_provider == "rocksdb") or (
            rocksdb and self.configured_provider == "hdfs"
        )

    @property
    def provider(self) -> str:
        """hdfs or rocksdb, inferred from the files; the offsets conf when there are none or
        both providers' files are there."""
        hdfs, rocksdb = self._providers
        if hdfs and rocksdb:
            # Both providers' files (an interrupted conversion): Spark loads the configured one.
            return self.configured_provider or "mixed"
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

    @property
    def metadata_v2_files(self) -> dict[int, CheckpointFile]:
        """``_metadata/v2/<batchId>`` files by batch id (Spark reads a batch with the newest at
        or below it: ``replay.history``)."""
        prefix = f"{self.path}/_metadata/v2/"
        return {
            int(name): f
            for f in self.metadata_files
            if f.path.startswith(prefix) and (name := f.path[len(prefix) :]).isdigit()
        }


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


C = TypeVar("C", bound="Checkpoint")


class Checkpoint:
    """A streaming query's checkpoint, as found in one listing.

    Build it with :meth:`open` (or :func:`ckpt_cli.open`, whose :class:`ckpt_cli.Checkpoint`
    adds the commands as methods: ``ckpt_cli.api``). Log contents are parsed on first use
    and cached; they raise :class:`~ckpt_cli.errors.FormatError` naming the file when Spark
    could not read it either.
    """

    def __init__(self, storage: Storage, listing: Listing) -> None:
        self.storage = storage
        self.listing = listing
        storage.use_listing(listing)  # sizes for reads without HEADs
        self.files: list[CheckpointFile] = classify_listing(listing)
        # See tolerant_view: False raises on an unreadable latest log entry.
        self.tolerant = False
        self._offsets_cache: dict[int, logs.OffsetSeq] = {}
        self._commit_cache: dict[int, logs.CommitMetadata] = {}
        self._check_is_checkpoint()

    @classmethod
    def open(
        cls: type[C],
        location: str | Storage,
        storage_options: Mapping[str, Any] | None = None,
        progress: ProgressSink = NULL_PROGRESS,
        stats: StorageStats | None = None,
    ) -> C:
        """List ``location`` once and build the model, counting requests in ``stats`` when
        given. Raises a CkptError on bad input."""
        storage = (
            location
            if isinstance(location, Storage)
            else Storage.from_url(location, storage_options, stats)
        )
        with collector_paused():  # linear in the number of files: see collector_paused
            checkpoint = cls(storage, storage.list_all(progress))
            freeze_if_large(len(checkpoint.files))
        return checkpoint

    def tolerant_view(self: C) -> C:
        """This checkpoint read as far as it can be, for validation: an unreadable latest log
        entry is then a finding rather than an error, and confs come from the newest readable
        one. A copy sharing the listing, the files and the parsed logs; ``self`` is unchanged."""
        if self.tolerant:
            return self
        view = copy.copy(self)
        view.tolerant = True
        return view

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
        """The files of these kinds, in listing (path) order."""
        found = [self._by_kind[k] for k in dict.fromkeys(kinds) if k in self._by_kind]
        if len(found) == 1:
            return list(found[0])
        return sorted(chain.from_iterable(found), key=_path)

    @cached_property
    def _by_kind(self) -> dict[FileKind, list[CheckpointFile]]:
        # Commands ask for a few kinds many times: one pass over the files, not one per call.
        by_kind: dict[FileKind, list[CheckpointFile]] = {}
        for f in self.files:
            found = by_kind.get(f.kind)
            if found is None:
                found = by_kind[f.kind] = []
            found.append(f)
        return by_kind

    def file(self, path: str) -> CheckpointFile | None:
        """The listed file at ``path``, else None (found as the listing finds its entry:
        ``files`` are classified in the listing's order, one per entry)."""
        i = self.listing.index(path)
        return None if i is None else self.files[i]

    def sidecars_of(self, path: str) -> list[CheckpointFile]:
        """The checksum sidecars of the file at ``path``, in path order. Looked up by the
        two names they can have (Hadoop's ``.<name>.crc`` beside it, Spark 4's
        ``<name>.crc``), kept when the listing classified them as covering ``path``: no map
        of every sidecar is built for a few files."""
        found = []
        for candidate in sorted((hadoop_crc_name(path), f"{path}.crc")):
            f = self.file(candidate)
            if f is not None and f.target == path and f.kind in CHECKSUM_KINDS:
                found.append(f)
        return found

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
        return self._log_entry(self._offsets_cache, "offsets", batch, logs.parse_offsets)

    def commit(self, batch: int) -> logs.CommitMetadata:
        """Parse ``commits/<batch>`` (which must be in the listing)."""
        return self._log_entry(self._commit_cache, "commits", batch, logs.parse_commit)

    def _log_entry(
        self,
        cache: dict[int, _T],
        log: str,
        batch: int,
        parse: Callable[[str, int, bytes], _T],
    ) -> _T:
        if batch not in cache:
            path = f"{log}/{batch}"
            if self.listing.get(path) is None:
                raise CkptError(f"{path}: not in the checkpoint")
            cache[batch] = parse(path, batch, self.storage.read_bytes(path))
        return cache[batch]

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
        # Built lazily, after open's pause: a few objects per file and version, all kept.
        with collector_paused():
            operators = self._operators()
            freeze_if_large(len(self.files))
        return operators

    def _operators(self) -> dict[int, Operator]:
        operators: dict[int, Operator] = {}
        # Files of one directory share one StoreLocation object and come together in the
        # sorted listing: the partition is looked up once per run of them.
        last: StoreLocation | None = None
        partition = Partition(-1, "")
        store = Store("")
        for f in self.files:
            if f.operator is None:
                continue
            loc = f.store
            if loc is None or loc is not last:
                op = operators.get(f.operator)
                if op is None:
                    op = operators[f.operator] = Operator(f.operator, f"state/{f.operator}")
                if loc is None:
                    if f.kind is FileKind.OPERATOR_METADATA:
                        op.metadata_files.append(f)
                    elif f.kind is FileKind.STATE_SCHEMA:
                        op.schema_files.append(f)
                    else:
                        op.other_files.append(f)
                    continue
                store, partition = _partition_of(op, loc)
                last = loc
            partition.files.append(f)
            if f.version is not None and f.kind in VERSIONED_KINDS:
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
        return dict(sorted((kind.value, len(found)) for kind, found in self._by_kind.items()))


_kind = attrgetter("kind")


_path = attrgetter("entry.path")


def _partition_of(op: Operator, loc: StoreLocation) -> tuple[Store, Partition]:
    """The store and partition of ``op`` at ``loc``, made on first sight."""
    store = op.stores.get(loc.store)
    if store is None:
        store = op.stores[loc.store] = Store(loc.store)
    partition = store.partitions.get(loc.partition)
    if partition is None:
        path = f"{op.path}/{loc.partition}"
        if loc.store != DEFAULT_STORE:
            path += f"/{loc.store}"
        partition = store.partitions[loc.partition] = Partition(loc.partition, path)
    return store, partition


def _sorted_stores(stores: dict[str, Store]) -> dict[str, Store]:
    def key(name: str) -> tuple[int, str]:
        if name == DEFAULT_STORE:
            return (0, name)
        if name in JOIN_STORES:
            return (1 + JOIN_STORES.index(name), name)
        return (10, name)

    return {name: stores[name] for name in sorted(stores, key=key)}
