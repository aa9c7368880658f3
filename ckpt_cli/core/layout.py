"""Where a file of a checkpoint is, and what that makes it: the classification of one
listing entry from its checkpoint-relative path alone (Spark's directory layout and file
names, :mod:`ckpt_cli.formats.names`). :class:`~ckpt_cli.core.model.Checkpoint` builds its model
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


# What a file name says within a directory of a given role: kind, batch, version, uniqueId,
# and the name of the file it stands for (temp files, checksum sidecars) in that directory.
_Named = tuple[FileKind, "int | None", "int | None", "str | None", "str | None"]


def classify_listing(entries: Iterable[FileEntry]) -> list[CheckpointFile]:
    """Classify every entry of a listing, sharing the work per directory and per name.

    A sorted listing has a directory's files together, and the same names recur in every
    partition (``1.delta`` ... ``100.delta``), so each name is parsed once per role.
    """
    dirs: dict[str, _Dir] = {}
    by_role: dict[str, dict[str, _Named]] = {}  # role -> name -> what it says
    out: list[CheckpointFile] = []
    append = out.append
    new = tuple.__new__  # not the namedtuple's __new__, a Python function (see list_local)
    parent: str | None = None
    d = _dir_of("")
    names: dict[str, _Named] = {}
    for entry in entries:
        path = entry.path
        cut = path.rfind("/")
        if cut < 0 or path[:cut] != parent:
            parent = path[:cut] if cut >= 0 else ""
            d = dirs.get(parent) or dirs.setdefault(parent, _dir_of(parent))
            names = by_role.setdefault(d.role, {})
        name = path[cut + 1 :]
        named = names.get(name)
        if named is None:
            named = names[name] = _classify_name(d.role, name)
        kind, batch, version, unique_id, target = named
        if target is not None:
            target = d.prefix + target
        append(
            new(
                CheckpointFile,
                (entry, kind, d.location, d.operator, batch, version, unique_id, target),
            )
        )
    return out


def classify(entry: FileEntry) -> CheckpointFile:
    """Say what one listed file is, from its checkpoint-relative path alone."""
    return classify_listing((entry,))[0]


def _classify_name(role: str, name: str) -> _Named:
    """What ``name`` is in a directory of ``role`` (see :class:`_Dir`). Every file keeps its
    directory's store location and operator: the log and root roles have none."""
    if name.startswith("."):
        final = parse_temp_name(name) if name.endswith(".tmp") else None
        if final is not None:
            return _TEMP, None, None, None, final
        covered = parse_hadoop_crc_name(name)
        if covered is not None:
            return _HADOOP_CRC, None, None, None, covered
        if name == CKPT_LOCK_NAME and role == "root":
            return FileKind.CKPT_LOCK, None, None, None, None
        return _UNKNOWN, None, None, None, None

    if role == "store":
        state = parse_state_file_name(name)
        if state is not None:
            return STATE_FILE_KINDS[state.type], None, state.version, state.unique_id, None
        covered_state = parse_spark_checksum_name(name)
        if covered_state is not None:
            version, unique_id = covered_state.version, covered_state.unique_id
            return _SPARK_CHECKSUM, None, version, unique_id, name[:-4]
    elif role == "SSTs":
        if name.endswith(".sst"):
            return _SST, None, None, None, None
    elif role == "logs":
        if name.endswith(".log"):
            return _ROCKSDB_LOG, None, None, None, None
    elif role == "_metadata":
        if name == "schema":
            return _STATE_SCHEMA, None, None, None, None
    elif role in ("offsets", "commits"):
        batch = parse_batch_name(name)
        if batch is not None:
            return (_OFFSETS if role == "offsets" else _COMMIT), batch, None, None, None
    elif role == "root":
        if name == "metadata":
            return _METADATA, None, None, None, None
    elif role == "sources":
        # Source logs are the source's own business (file source log, Kafka initial offsets).
        batch = parse_batch_name(name)
        if batch is None:
            batch = parse_compact_name(name)
        return _SOURCE_LOG, batch, None, None, None
    elif role == "operator_metadata":
        return _OPERATOR_METADATA, None, None, None, None
    elif role == "operator_schema":
        return _STATE_SCHEMA, None, None, None, None
    return _UNKNOWN, None, None, None, None


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
