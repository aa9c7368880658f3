"""File names Spark writes in a checkpoint, and how to tell them apart.

Spark's own rules (see docs/spark-checkpoint-format.md §1.3, §2, §3.1, §5.1):
- metadata logs (offsets/, commits/, source logs) name batch files by the decimal batch id;
- atomic writes go through a temp file ``.<final>.<uuid>.tmp`` (``.<final>.<uuid>.TID<n>.tmp``
  when written by a task);
- Hadoop's ChecksumFileSystem adds a hidden binary sidecar ``.<name>.crc`` on local disk;
- Spark 4.1+ with checkpoint format v2 adds a visible JSON checksum ``<state file>.crc``;
- HDFS-backed stores write ``<v>.delta`` / ``<v>.snapshot``; RocksDB stores write
  ``<v>.zip`` / ``<v>.changelog`` (format v1) or ``<v>_<uniqueId>.zip`` /
  ``<v>_<uniqueId>.changelog`` (format v2), plus ``SSTs/*.sst`` and ``logs/*.log``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

_BATCH_RE = re.compile(r"^\d{1,18}$")
_COMPACT_RE = re.compile(r"^(\d{1,18})\.compact$")
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_TEMP_RE = re.compile(rf"^\.(?P<final>.+)\.{_UUID}(?:\.TID\d+)?\.tmp$")
_HDFS_STATE_RE = re.compile(r"^(\d{1,18})\.(delta|snapshot)$", re.IGNORECASE)
_ROCKSDB_STATE_RE = re.compile(r"^(\d{1,18})(?:_([0-9A-Za-z-]+))?\.(zip|changelog)$")


class StateFileType(str, Enum):
    """The four kinds of versioned state store file."""

    DELTA = "delta"
    SNAPSHOT = "snapshot"
    ZIP = "zip"
    CHANGELOG = "changelog"

    @property
    def provider(self) -> str:
        return "hdfs" if self in (StateFileType.DELTA, StateFileType.SNAPSHOT) else "rocksdb"


@dataclass(frozen=True, slots=True)
class StateFileName:
    version: int
    type: StateFileType
    unique_id: str | None  # checkpoint format v2 only


def parse_batch_name(name: str) -> int | None:
    """The batch id of a metadata-log file name (``"12"`` -> 12), else None."""
    return int(name) if _BATCH_RE.match(name) else None


def parse_compact_name(name: str) -> int | None:
    """The batch id of a compacted source/sink log file (``"9.compact"`` -> 9), else None."""
    match = _COMPACT_RE.match(name)
    return int(match.group(1)) if match else None


def parse_temp_name(name: str) -> str | None:
    """The final name an atomic-write temp file was meant to become, else None."""
    match = _TEMP_RE.match(name)
    return match.group("final") if match else None


def hadoop_crc_name(path: str) -> str:
    """The Hadoop ChecksumFileSystem sidecar of ``path``: ``.<name>.crc`` beside it."""
    parent, _, name = path.rpartition("/")
    return f"{parent}/.{name}.crc" if parent else f".{name}.crc"


def parse_hadoop_crc_name(name: str) -> str | None:
    """The file a Hadoop ChecksumFileSystem sidecar ``.<name>.crc`` covers, else None."""
    if name.startswith(".") and name.endswith(".crc") and len(name) > 5:
        return name[1:-4]
    return None


def parse_state_file_name(name: str) -> StateFileName | None:
    """Parse a versioned state store file name, as Spark's providers do."""
    match = _HDFS_STATE_RE.match(name)
    if match:
        return StateFileName(int(match.group(1)), StateFileType(match.group(2).lower()), None)
    match = _ROCKSDB_STATE_RE.match(name)
    if match:
        return StateFileName(int(match.group(1)), StateFileType(match.group(3)), match.group(2))
    return None


def parse_spark_checksum_name(name: str) -> StateFileName | None:
    """The state file a Spark 4.1+ JSON checksum sidecar ``<state file>.crc`` covers."""
    if name.endswith(".crc") and not name.startswith("."):
        return parse_state_file_name(name[:-4])
    return None


# ckpt's own lock file at the checkpoint root (see ckpt_cli.change.lock). Spark opens the root's
# files by name (metadata, offsets/, commits/, sources/, state/) and never lists the root.
CKPT_LOCK_NAME = ".ckpt-lock"
