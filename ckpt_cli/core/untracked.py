"""RocksDB files no zip names and format-v2 files of attempts the commit log did not choose:
what Spark itself never reads (cleanup removes them, validate reports them)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ckpt_cli.core.model import Checkpoint, CheckpointFile, FileKind, Partition
from ckpt_cli.core.rebuild import version_unique_id
from ckpt_cli.errors import FormatError
from ckpt_cli.formats import rocksdb_zip
from ckpt_cli.storage import Storage


def unchosen_attempt(
    ckpt: Checkpoint, op: int, store: str, partition: int, f: CheckpointFile
) -> str | None:
    """For a format-v2 state file of a task attempt the commit log did not choose (Spark
    never reads it), the uniqueId ``commits/<version-1>`` recorded; else None (also when that
    commit is purged: which attempt won is then unknown). Reads that commit."""
    if f.unique_id is None or f.version is None:
        return None
    chosen = version_unique_id(ckpt, op, store, partition, f.version)
    return chosen if chosen is not None and chosen != f.unique_id else None


def zip_names(part: Partition, meta: rocksdb_zip.RocksDBCheckpointMetadata) -> set[str]:
    """The SST/log paths a zip of ``part`` names."""
    return {
        f"{part.path}/{subdir}/{sf.dfs_file_name}"
        for subdir, files in (("SSTs", meta.sst_files), ("logs", meta.log_files))
        for sf in files
    }


@dataclass
class Untracked:
    """What ``untracked_shared_files`` found, by partition path."""

    # SST/log files no zip of their partition names.
    files: dict[str, list[CheckpointFile]] = field(default_factory=dict)
    # Partitions where a zip that had to be read could not be: untracked files unknown.
    unreadable: dict[str, FormatError] = field(default_factory=dict)
    # Partitions not looked into (over the read budget): files the zips read do not name.
    unresolved: dict[str, int] = field(default_factory=dict)


def untracked_shared_files(
    storage: Storage,
    parts: Iterable[Partition],
    known: Mapping[str, rocksdb_zip.RocksDBCheckpointMetadata | None] | None = None,
    budget: int | None = None,
) -> Untracked:
    """RocksDB SST/log files no zip of their partition names: Spark's untracked files, which
    its ``RocksDBFileManager.deleteOldVersions`` deletes only once older than every tracked
    file (they may belong to a zip not written yet). ``known``: zip metadata already read
    (None: unreadable, names nothing).

    The files are looked up in the zips, newest first, only until every file is named (no
    shortcut by modification time: a copy's times follow the copy's order), so a partition
    whose newest zips name all its files costs no more reads; each round fetches the next zip
    of every partition together (object stores). ``budget``: a partition with more zips than
    that left to read is not looked into (its unnamed files are ``unresolved``): reads are
    spent only where they can settle the answer."""
    # The readers only here: validate's restart check (``ckpt versions``) never calls this.
    from ckpt_cli.core.read import WHOLE_ZIP_BYTES, read_zip_metadata

    known = known or {}
    found = Untracked()
    queue: dict[str, list[CheckpointFile]] = {}
    unnamed: dict[str, list[CheckpointFile]] = {}
    by_path: dict[str, Partition] = {}
    for part in parts:
        shared = part.shared_files
        if not shared:
            continue
        zips = [f for f in part.files if f.kind is FileKind.ZIP]
        names: set[str] = set()
        for z in zips:
            meta = known.get(z.path)
            if meta is not None:
                names |= zip_names(part, meta)
        left = [f for f in shared if f.path not in names]
        if not left:
            continue
        todo = [z for z in zips if z.path not in known]
        if not todo:
            found.files[part.path] = left
        elif budget is not None and len(todo) > budget:
            found.unresolved[part.path] = len(left)
        else:
            by_path[part.path] = part
            queue[part.path] = sorted(todo, key=lambda f: (f.version or 0, f.path), reverse=True)
            unnamed[part.path] = left
    while True:
        step = {p: queue[p].pop(0) for p, files in unnamed.items() if files and queue[p]}
        if not step:
            break
        storage.prefetch([z.path for z in step.values() if z.entry.size <= WHOLE_ZIP_BYTES])
        for p, z in step.items():
            try:
                meta = read_zip_metadata(storage, z.path, z.entry.size)
            except FormatError as exc:
                found.unreadable[p] = exc
                del unnamed[p]
                continue
            names = zip_names(by_path[p], meta)
            unnamed[p] = [f for f in unnamed[p] if f.path not in names]
    found.files.update((p, files) for p, files in unnamed.items() if files)
    return found
