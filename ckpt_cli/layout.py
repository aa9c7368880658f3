"""Where a file of a checkpoint is, and what that makes it: the classification of one
listing entry from its checkpoint-relative path alone (Spark's directory layout and file
names, :mod:`ckpt_cli.formats.names`). :class:`~ckpt_cli.model.Checkpoint` builds its model
from these.

    metadata                    offsets/<batch>, commits/<batch>      sources/<n>/<batch>
    state/<op>/_metadata/...    state/<op>/_stateSchema/<store>/...
    state/<op>/<partition>[/<store>]/{<v>.delta, <v>.snapshot, <v>[_<id>].zip,
                                      <v>[_<id>].changelog, SSTs/*.sst, logs/*.log,
                                      _metadata/schema}
    plus temp files (.<name>.<uuid>.tmp), checksum sidecars (.<name>.crc, <state file>.crc)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

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
from ckpt_cli.storage import FileEntry

DEFAULT_STORE = "default"
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


STATE_FILE_KINDS = {
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


def classify_listing(entries: Iterable[FileEntry]) -> list[CheckpointFile]:
    """Classify every entry of a listing (sharing the work per directory)."""
    dirs: dict[str, _Dir] = {}
    return [classify(e, dirs) for e in entries]


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
                STATE_FILE_KINDS[state.type],
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
