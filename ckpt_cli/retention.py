"""Retention: which files no retained version needs (``ckpt orphans``), and removing them
safely (``ckpt cleanup``).

What is retained follows Spark's own rules, taking the more conservative one where the store
providers differ:

* the latest committed batch ``C`` and the ``N = minBatchesToRetain`` batches before it must
  stay restartable: state versions ``C+1-N .. C+1`` are planned exactly as Spark loads them
  (``state.plan_version``), and every file of those plans is needed. As in Spark's cleanup,
  nothing at or after the oldest needed version ``E`` of a partition is deleted, except, in
  checkpoint format v2, files of task attempts the commit log did not choose;
* RocksDB ``SSTs/``/``logs/`` files named by any zip at or after ``E`` are needed; files no zip
  names are orphans, deleted only when older than every file a retained zip names (Spark's rule
  in ``RocksDBFileManager.deleteOldVersions``); the others are listed as kept, with the reason;
* ``offsets/`` and ``commits/`` entries before ``C - N`` (Spark's purge threshold), and never one
  a retained version needs for its format-v2 uniqueId;
* file-source logs (``sources/<id>/``) superseded by a newer compact file;
* temp files of interrupted writes, and the ``.crc`` sidecars of every file removed;
* state files of versions after ``C+1`` (a batch in flight) are never touched.

Files modified less than ``min_age`` seconds ago are never deleted. Deletions are ordered so
that an interrupted cleanup leaves every retained version loadable: temp files, then files of
unchosen attempts and of old versions (oldest first), then old log entries, and the shared
files (SSTs, logs) they reference last.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ckpt_cli.errors import CkptError, FormatError, SafetyCheckError
from ckpt_cli.formats import logs, rocksdb
from ckpt_cli.lock import checkpoint_lock
from ckpt_cli.model import Checkpoint, CheckpointFile, FileKind, Partition
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.replay.plan import StateUnavailable, plan_version, version_unique_id
from ckpt_cli.replay.read import WHOLE_ZIP_BYTES, read_zip_metadata
from ckpt_cli.storage import FileEntry, Listing, Storage

SPARK_DEFAULT_MIN_BATCHES_TO_RETAIN = 100
DEFAULT_MIN_AGE_SECONDS = 3600.0
MIN_AGE_RISK = (
    "files younger than that may belong to a batch the query is still writing or to an upload "
    "in progress (RocksDB uploads SST files before the zip that names them), and removing them "
    "can break the next restart"
)

# Deletion classes, in the order they are deleted.
TEMP = "temp"
LOST_ATTEMPT = "lost_attempt"
OLD_VERSION = "old_version"
OLD_LOG = "old_log"
OLD_SOURCE_LOG = "old_source_log"
OLD_SHARED = "old_shared_file"
ORPHAN_SHARED = "orphan_shared_file"
CHECKSUM = "checksum"
CLASSES = (
    TEMP,
    LOST_ATTEMPT,
    OLD_VERSION,
    OLD_LOG,
    OLD_SOURCE_LOG,
    OLD_SHARED,
    ORPHAN_SHARED,
    CHECKSUM,
)
_PHASE = {
    TEMP: 0,
    LOST_ATTEMPT: 1,
    OLD_VERSION: 2,
    OLD_LOG: 3,
    OLD_SOURCE_LOG: 3,
    OLD_SHARED: 4,
    ORPHAN_SHARED: 4,
    CHECKSUM: 5,
}
DESCRIPTIONS = {
    TEMP: "temp files of interrupted atomic writes",
    LOST_ATTEMPT: "format-v2 state files of task attempts the commit log did not choose",
    OLD_VERSION: "state files of versions older than the retention window",
    OLD_LOG: "offsets/ and commits/ entries older than the retention window",
    OLD_SOURCE_LOG: "file-source log entries superseded by a newer compact file",
    OLD_SHARED: "RocksDB SST/log files only old versions name",
    ORPHAN_SHARED: "RocksDB SST/log files no zip names",
    CHECKSUM: "checksum sidecars whose file is removed or gone",
}


@dataclass
class Deletion:
    path: str
    size: int
    mtime: float | None
    klass: str
    reason: str
    # Ordering within a phase: version (state files) or batch (logs).
    order: int = 0
    # For a checksum sidecar: the file it covers (deleted right after it).
    covers: str | None = None
    phase: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "class": self.klass,
            "reason": self.reason,
            "mtime": self.mtime,
        }


@dataclass
class CleanupPlan:
    checkpoint: str
    retain: int
    retain_source: str
    min_age: float
    now: float
    latest_committed: int | None
    deletions: list[Deletion] = field(default_factory=list)
    kept_young: list[Deletion] = field(default_factory=list)
    # Files no retained version needs that Spark's own rules keep (shown, never deleted).
    kept: list[Deletion] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    query_active: bool = False
    newest_offsets_age: float | None = None

    @property
    def bytes(self) -> int:
        return sum(d.size for d in self.deletions)

    def by_class(self) -> dict[str, dict[str, int]]:
        out = {c: {"files": 0, "bytes": 0} for c in CLASSES}
        for d in self.deletions:
            out[d.klass]["files"] += 1
            out[d.klass]["bytes"] += d.size
        return {c: v for c, v in out.items() if v["files"]}

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint,
            "retain": self.retain,
            "retain_source": self.retain_source,
            "min_age_seconds": self.min_age,
            "latest_committed": self.latest_committed,
            "query_active": self.query_active,
            "newest_offsets_age_seconds": self.newest_offsets_age,
            "files": len(self.deletions),
            "bytes": self.bytes,
            "by_class": self.by_class(),
            "deletions": [d.to_json() for d in self.deletions],
            "kept_too_young": [d.to_json() for d in self.kept_young],
            "kept": [d.to_json() for d in self.kept],
            "skipped": self.skipped,
        }


def retention_of(ckpt: Checkpoint, retain: int | None) -> tuple[int, str]:
    if retain is not None:
        if retain < 1:
            raise CkptError(f"--retain {retain}: must be at least 1")
        return retain, "--retain"
    value = ckpt.conf.get(logs.MIN_BATCHES_TO_RETAIN)
    if value is not None and value.isdigit() and int(value) >= 1:
        return int(value), f"{logs.MIN_BATCHES_TO_RETAIN} in the offsets conf"
    return SPARK_DEFAULT_MIN_BATCHES_TO_RETAIN, "Spark's default minBatchesToRetain"


class _Planner:
    def __init__(self, ckpt: Checkpoint, retain: int, min_age: float, now: float) -> None:
        self.ckpt = ckpt
        self.retain = retain
        self.min_age = min_age
        self.now = now
        self.candidates: dict[str, Deletion] = {}
        self.skipped: list[dict[str, Any]] = []
        self.kept: list[Deletion] = []
        # Per format-v2 checkpoint: commits a retained version needs for its uniqueId.
        self.min_needed_commit: int | None = None

    def add(
        self,
        f: CheckpointFile,
        klass: str,
        reason: str,
        order: int = 0,
        covers: Deletion | None = None,
    ) -> None:
        if f.path in self.candidates:
            return
        phase = covers.phase if covers is not None else _PHASE[klass]
        self.candidates[f.path] = Deletion(
            f.path,
            f.entry.size,
            f.entry.mtime,
            klass,
            reason,
            covers.order if covers is not None else order,
            covers.path if covers is not None else None,
            phase,
        )

    # state ------------------------------------------------------------------------------

    def plan_state(self) -> None:
        latest = self.ckpt.batches.latest_committed
        if latest is None:
            return
        top = latest + 1  # the newest committed state version
        # The zips of RocksDB partitions are all read to see which SSTs they name: on object
        # stores, fetch them together rather than one request after another.
        self.ckpt.storage.prefetch(
            [
                f.path
                for f in self.ckpt.of_kind(FileKind.ZIP)
                if f.version is not None and f.version <= top and f.entry.size <= WHOLE_ZIP_BYTES
            ]
        )
        for op in self.ckpt.operators.values():
            for store in op.stores.values():
                for part in store.partitions.values():
                    self._plan_partition(op.id, store.name, part, top)

    def _plan_partition(self, op: int, store: str, part: Partition, top: int) -> None:
        first = max(1, top - self.retain)
        versions = [v for v in part.version_ids if first <= v <= top]
        if not versions:
            self.skipped.append(
                {"path": part.path, "reason": f"no state version between {first} and {top}"}
            )
            return
        needed: set[str] = set()
        # v2 plans read changelog lineage lines: fetch this partition's together.
        self.ckpt.storage.prefetch(
            [
                f.path
                for f in part.files
                if f.kind is FileKind.CHANGELOG
                and f.unique_id is not None
                and f.version is not None
                and first <= f.version <= top
            ],
            heads=True,
        )
        for v in range(first, top + 1):
            try:
                plan = plan_version(self.ckpt, op, part.id, v, store=store)
            except StateUnavailable as exc:
                if v < versions[0]:
                    continue  # retention already moved past it (Spark's own cleanup)
                if exc.reason == "UNKNOWN_UNIQUE_ID":
                    # Its commit is purged, so which attempt won is unknown: keep them all.
                    sv = part.versions.get(v)
                    needed.update(f.path for f in (sv.files if sv else []))
                    continue
                self.skipped.append(
                    {"path": part.path, "reason": f"version {v} is not loadable: {exc.message}"}
                )
                return
            except FormatError as exc:
                self.skipped.append({"path": part.path, "reason": str(exc)})
                return
            needed.update(f.path for f in plan.files)
            if plan.unique_id is not None:
                self._need_commit(v - 1)
        planned = [f for f in part.files if f.path in needed and f.version is not None]
        if not planned:
            return
        oldest_needed = min(f.version for f in planned if f.version is not None)
        state_kinds = (FileKind.DELTA, FileKind.SNAPSHOT, FileKind.ZIP, FileKind.CHANGELOG)
        kept_zips: list[CheckpointFile] = []
        for f in part.files:
            if f.kind not in state_kinds or f.version is None or f.path in needed:
                if f.kind is FileKind.ZIP and f.path in needed:
                    kept_zips.append(f)
                continue
            if f.version > top:
                continue  # a batch in flight: Spark overwrites or ignores these
            if f.version < oldest_needed:
                self.add(
                    f,
                    OLD_VERSION,
                    f"version {f.version} is older than {oldest_needed}, the oldest version "
                    f"the last {self.retain} batches need",
                    f.version,
                )
            elif f.unique_id is not None and self._is_lost_attempt(op, store, part, f):
                self.add(
                    f,
                    LOST_ATTEMPT,
                    f"uniqueId {f.unique_id} is not the one commits/{f.version - 1} recorded",
                    f.version,
                )
            elif f.kind is FileKind.ZIP:
                kept_zips.append(f)
        if any(f.kind in (FileKind.SST, FileKind.ROCKSDB_LOG) for f in part.files):
            self._plan_shared(part, kept_zips)

    def _need_commit(self, batch: int) -> None:
        if self.min_needed_commit is None or batch < self.min_needed_commit:
            self.min_needed_commit = batch

    def _is_lost_attempt(self, op: int, store: str, part: Partition, f: CheckpointFile) -> bool:
        return unchosen_attempt(self.ckpt, op, store, part.id, f) is not None

    def _zip_metadata(self, path: str) -> rocksdb.RocksDBCheckpointMetadata:
        entry = self.ckpt.listing.get(path)
        return read_zip_metadata(self.ckpt.storage, path, entry.size if entry else None)

    def _plan_shared(self, part: Partition, kept_zips: list[CheckpointFile]) -> None:
        """SSTs/logs: needed when a kept zip names them."""
        named: set[str] = set()
        read: dict[str, rocksdb.RocksDBCheckpointMetadata | None] = {}
        for z in kept_zips:
            try:
                meta = self._zip_metadata(z.path)
            except FormatError as exc:
                self.skipped.append(
                    {"path": part.path, "reason": f"cannot read {z.path}: {exc.problem}"}
                )
                # Unknown references: keep every shared file of this partition.
                return
            read[z.path] = meta
            named.update(zip_names(part, meta))
        old_zips = {d.path for d in self.candidates.values() if d.path.startswith(part.path + "/")}
        named_by_old: set[str] = set()
        for path in old_zips:
            if not path.endswith(".zip"):
                continue
            try:
                meta = self._zip_metadata(path)
            except FormatError:
                read[path] = None
                continue
            read[path] = meta
            named_by_old.update(zip_names(part, meta))
        # The zips not read yet (a batch in flight) are read only if some file is unnamed.
        untracked = untracked_shared_files(self.ckpt.storage, [part], read)
        if part.path in untracked.unreadable:
            bad = untracked.unreadable[part.path]
            self.skipped.append(
                {"path": part.path, "reason": f"cannot read {bad.path}: {bad.problem}"}
            )
            return
        orphans = {f.path for f in untracked.files.get(part.path, [])}
        shared = part.shared_files
        tracked_mtimes = [f.entry.mtime for f in shared if f.path in named]
        oldest_tracked = min((m for m in tracked_mtimes if m is not None), default=None)
        for f in shared:
            if f.path in named:
                continue
            if f.path in named_by_old:
                self.add(f, OLD_SHARED, "named only by zips of versions being removed", 10**9)
                continue
            if f.path not in orphans:
                continue  # named by the zip of a batch in flight
            if f.entry.size == 0:
                # Spark uploads under the final name, so an upload killed before its first
                # write leaves an empty file; once older than --min-age it is no upload.
                self.add(f, ORPHAN_SHARED, "empty file of an interrupted upload", 10**9)
                continue
            # Spark's rule: an unnamed file newer than the oldest file a retained zip names
            # may belong to a version whose zip is not written yet. Kept, but shown.
            if oldest_tracked is None or f.entry.mtime is None or f.entry.mtime >= oldest_tracked:
                if oldest_tracked is None:
                    why = "no retained zip names any file here to compare its age with"
                elif f.entry.mtime is None:
                    why = "its modification time is unknown"
                else:
                    why = "it is not older than every file the retained zips name"
                self.kept.append(
                    Deletion(
                        f.path,
                        f.entry.size,
                        f.entry.mtime,
                        ORPHAN_SHARED,
                        f"no zip names it, but {why}: Spark keeps it (it may belong to a zip "
                        "not written yet)",
                    )
                )
                continue
            self.add(
                f,
                ORPHAN_SHARED,
                "no zip names it, and it is older than every file the retained zips name",
                10**9,
            )

    # logs and other files -------------------------------------------------------------

    def plan_logs(self) -> None:
        b = self.ckpt.batches
        latest = b.latest_committed
        if latest is None:
            return
        threshold = latest - self.retain  # Spark purges batch ids below this
        if self.min_needed_commit is not None:
            threshold = min(threshold, self.min_needed_commit)
        for f in self.ckpt.of_kind(FileKind.OFFSETS, FileKind.COMMIT):
            if f.batch is not None and f.batch < threshold:
                self.add(
                    f,
                    OLD_LOG,
                    f"batch {f.batch} is older than {threshold} (latest committed {latest} - "
                    f"retain {self.retain})",
                    f.batch,
                )
        by_source: dict[str, list[CheckpointFile]] = {}
        for f in self.ckpt.of_kind(FileKind.SOURCE_LOG):
            by_source.setdefault(f.entry.parent, []).append(f)
        for files in by_source.values():
            compacts = [
                f.batch for f in files if f.path.endswith(".compact") and f.batch is not None
            ]
            if not compacts:
                continue
            newest = max(compacts)
            for f in files:
                if f.batch is not None and f.batch < newest:
                    self.add(
                        f,
                        OLD_SOURCE_LOG,
                        f"superseded by {f.entry.parent}/{newest}.compact",
                        f.batch,
                    )

    def plan_temp(self) -> None:
        for f in self.ckpt.temp_files:
            self.add(f, TEMP, f"temp file of an interrupted write of {f.target or 'a file'}")

    def plan_checksums(self) -> None:
        present = {f.path for f in self.ckpt.files}
        sidecars = self.ckpt.of_kind(FileKind.HADOOP_CRC, FileKind.SPARK_CHECKSUM)
        # Twice: Hadoop writes a .crc of Spark's <name>.crc too (a sidecar of a sidecar).
        for _ in range(2):
            for f in sidecars:
                if f.target is None or f.path in self.candidates:
                    continue
                main = self.candidates.get(f.target)
                if main is not None:
                    self.add(f, CHECKSUM, f"checksum of {f.target}, which is removed", covers=main)
                elif f.target not in present:
                    self.add(f, CHECKSUM, f"checksum of {f.target}, which is not there")

    def finish(self, plan: CleanupPlan) -> None:
        cutoff = self.now - self.min_age
        for d in self.candidates.values():
            if d.mtime is not None and d.mtime > cutoff:
                plan.kept_young.append(d)
            else:
                plan.deletions.append(d)
        # A sidecar stays when its file stays.
        young = {d.path for d in plan.kept_young}
        moved = [d for d in plan.deletions if d.covers is not None and d.covers in young]
        for d in moved:
            plan.deletions.remove(d)
            plan.kept_young.append(d)
        plan.deletions.sort(key=_delete_order)
        plan.kept_young.sort(key=lambda d: d.path)


def _delete_order(d: Deletion) -> tuple[int, int, str, int]:
    # A sidecar sorts right after the file it covers.
    return d.phase, d.order, d.covers or d.path, 1 if d.covers else 0


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


def zip_names(part: Partition, meta: rocksdb.RocksDBCheckpointMetadata) -> set[str]:
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
    known: Mapping[str, rocksdb.RocksDBCheckpointMetadata | None] | None = None,
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


def plan_cleanup(
    ckpt: Checkpoint,
    *,
    retain: int | None = None,
    min_age: float = DEFAULT_MIN_AGE_SECONDS,
    now: float | None = None,
) -> CleanupPlan:
    """Decide what ``cleanup`` would delete; reads only the log entries and zips it needs."""
    # Cleaning a damaged checkpoint could make it worse: the logs must read (the error names
    # the file; `ckpt validate` and `ckpt repair` deal with damage).
    _ = ckpt.query_id, ckpt.latest_offsets, ckpt.latest_commit
    n, source = retention_of(ckpt, retain)
    now = time.time() if now is None else now
    plan = CleanupPlan(ckpt.storage.url, n, source, min_age, now, ckpt.batches.latest_committed)
    plan.newest_offsets_age = newest_offsets_age(ckpt, now)
    if plan.newest_offsets_age is not None:
        plan.query_active = plan.newest_offsets_age < min_age
    planner = _Planner(ckpt, n, min_age, now)
    planner.plan_temp()
    planner.plan_state()
    planner.plan_logs()
    planner.plan_checksums()
    planner.finish(plan)
    plan.skipped = planner.skipped
    plan.kept = sorted(planner.kept, key=lambda d: d.path)
    _keep_symlinks(ckpt, plan)
    return plan


def _keep_symlinks(ckpt: Checkpoint, plan: CleanupPlan) -> None:
    """Symbolic links are never deleted, nor anything through them: a linked directory is not
    listed at all, a linked file stays; both are reported."""
    links = ckpt.listing.symlinks
    for rel, target in links.items():
        plan.skipped.append(
            {
                "path": rel,
                "reason": f"a symbolic link (to {target}): ckpt does not follow links or "
                "delete through them",
            }
        )
    if links:
        plan.deletions = [d for d in plan.deletions if d.path not in links]


# -- safety checks (the library's, whatever calls it) ------------------------------------------


def format_duration(seconds: float) -> str:
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:g}s"


def check_min_age(min_age: float, *, force: bool) -> None:
    """Like Delta's VACUUM retention check: a --min-age below the default needs ``force``."""
    if min_age < DEFAULT_MIN_AGE_SECONDS and not force:
        raise SafetyCheckError(
            f"--min-age {format_duration(min_age)} is below the default "
            f"{format_duration(DEFAULT_MIN_AGE_SECONDS)}: {MIN_AGE_RISK}",
            hint="pass --force if you are sure no query is running on this checkpoint",
        )


def newest_offsets_age(ckpt: Checkpoint, now: float) -> float | None:
    """Seconds since the newest offsets entry was written: how ckpt judges a query active."""
    mtimes = [f.entry.mtime for f in ckpt.of_kind(FileKind.OFFSETS) if f.entry.mtime is not None]
    return round(now - max(mtimes), 3) if mtimes else None


def check_not_active(ckpt: Checkpoint, *, min_age: float, now: float, force: bool) -> None:
    """Refuse (unless ``force``) when the newest offsets entry is younger than ``min_age``."""
    age = newest_offsets_age(ckpt, now)
    if age is not None and age < min_age and not force:
        raise SafetyCheckError(
            f"{ckpt.storage.url}: the query looks active (newest offsets entry written "
            f"{age:.0f} s ago, under --min-age {format_duration(min_age)}); not changing it",
            hint="stop the query first, or pass --force if you know it is stopped",
        )


def check_old_enough(
    ckpt: Checkpoint, paths: Iterable[str], *, min_age: float, now: float, force: bool
) -> None:
    """Refuse (unless ``force``) to touch a file modified less than ``min_age`` ago."""
    if force:
        return
    cutoff = now - min_age
    for path in paths:
        entry = ckpt.listing.get(path)
        if entry is not None and entry.mtime is not None and entry.mtime > cutoff:
            raise SafetyCheckError(
                f"{path}: modified {max(0.0, now - entry.mtime):.0f} s ago, under --min-age "
                f"{format_duration(min_age)}; not touching it ({MIN_AGE_RISK})",
                hint="wait until it is older, or pass --force if you know no query is running",
            )


# -- applying ------------------------------------------------------------------------------


@dataclass
class CleanupResult:
    deleted: int
    bytes: int
    delete_requests: int
    manifest: str | None
    # Planned files left alone because they resolve outside the checkpoint: path -> why.
    refused: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "deleted": self.deleted,
            "bytes": self.bytes,
            "delete_requests": self.delete_requests,
            "manifest": self.manifest,
            "refused": self.refused,
        }


def default_manifest_location(ckpt: Checkpoint, now: float) -> str:
    """Beside the checkpoint (not inside it: Spark would see an unknown file)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    root = ckpt.storage.root.rstrip("/")
    return f"{root}.ckpt-cleanup-{stamp}.json"


def apply_cleanup(
    ckpt: Checkpoint,
    plan: CleanupPlan,
    *,
    manifest: str | None = None,
    batch_size: int = 1000,
    force: bool = False,
    now: float | None = None,
    break_lock: bool = False,
    progress: ProgressSink = NULL_PROGRESS,
) -> CleanupResult:
    """Write the manifest, then delete the plan's files in its order, in batches.

    The safety checks are here, whatever the caller: a ``plan.min_age`` below the default, an
    active query (newest offsets entry younger than ``plan.min_age``) and files younger than it
    are refused unless ``force``; files resolving outside the checkpoint are left alone and
    returned in ``refused``; the checkpoint lock is held while deleting (``break_lock``: take
    over a stale one, see :mod:`ckpt_cli.lock`).
    """
    now = time.time() if now is None else now
    check_min_age(plan.min_age, force=force)
    check_not_active(ckpt, min_age=plan.min_age, now=now, force=force)
    check_old_enough(
        ckpt, (d.path for d in plan.deletions), min_age=plan.min_age, now=now, force=force
    )
    refused = ckpt.storage.outside([d.path for d in plan.deletions])
    deletions = [d for d in plan.deletions if d.path not in refused]
    if not deletions:
        return CleanupResult(0, 0, 0, None, refused)
    with checkpoint_lock(ckpt.storage, "ckpt cleanup", break_lock=break_lock):
        location = manifest or default_manifest_location(ckpt, plan.now)
        body = json.dumps({"plan": plan.to_json(), "written_at": time.time()}, indent=1)
        ckpt.storage.write_text_absolute(location, body)
        deleted = nbytes = requests = 0
        progress.start("Deleting", total=len(deletions))
        try:
            for chunk in _chunks(deletions, batch_size):
                requests += ckpt.storage.delete_many([d.path for d in chunk])
                deleted += len(chunk)
                nbytes += sum(d.size for d in chunk)
                progress.advance(len(chunk))
        finally:
            progress.close()
    return CleanupResult(deleted, nbytes, requests, location, refused)


def _chunks(items: list[Deletion], size: int) -> Iterable[list[Deletion]]:
    # Phases never share a chunk, so the crash-safe order holds between requests too.
    chunk: list[Deletion] = []
    phase: int | None = None
    for d in items:
        p = _delete_order(d)[0]
        if chunk and (len(chunk) >= size or p != phase):
            yield chunk
            chunk = []
        chunk.append(d)
        phase = p
    if chunk:
        yield chunk


# -- many checkpoints under one prefix -----------------------------------------------------------


def find_checkpoints(listing: Iterable[FileEntry]) -> dict[str, list[FileEntry]]:
    """Checkpoint roots under a prefix (from one listing of it), each with its own entries
    (paths relative to that root). A root is a directory holding a ``metadata`` file or
    ``offsets/``/``commits/`` entries; ``_metadata`` directories inside state are not roots."""
    entries = list(listing)
    roots: set[str] = set()
    for e in entries:
        parts = e.path.split("/")
        if parts[-1] == "metadata" and (len(parts) < 2 or parts[-2] != "_metadata"):
            if "state" not in parts[:-1]:
                roots.add("/".join(parts[:-1]))
        elif len(parts) >= 2 and parts[-2] in ("offsets", "commits") and parts[-1].isdigit():
            roots.add("/".join(parts[:-2]))
    # The innermost root owns a file; a checkpoint never nests inside another's state/.
    ordered = sorted(roots, key=lambda r: -r.count("/") if r else 0)
    found: dict[str, list[FileEntry]] = {r: [] for r in roots}
    for e in entries:
        for root in ordered:
            prefix = f"{root}/" if root else ""
            if e.path.startswith(prefix):
                found[root].append(e._replace(path=e.path[len(prefix) :]))
                break
    return found


@dataclass(frozen=True)
class _ScanSettings:
    base: Storage
    retain: int | None
    min_age: float
    now: float


_SCAN: _ScanSettings | None = None


def _init_scan(settings: _ScanSettings) -> None:
    global _SCAN
    _SCAN = settings


def _scan_one(unit: tuple[str, list[FileEntry]]) -> dict[str, Any]:
    settings = _SCAN
    assert settings is not None
    root, entries = unit
    base = settings.base
    url = f"{base.url.rstrip('/')}/{root}" if root else base.url
    storage = Storage(base.fs, base.full_path(root) if root else base.root, url)
    try:
        ckpt = Checkpoint(storage, Listing(entries))
        plan = plan_cleanup(
            ckpt, retain=settings.retain, min_age=settings.min_age, now=settings.now
        )
    except CkptError as exc:
        return {"checkpoint": storage.url, "error": exc.message}
    return plan.to_json()


def scan_orphans(
    storage: Storage,
    engine: Any,
    *,
    retain: int | None = None,
    min_age: float = DEFAULT_MIN_AGE_SECONDS,
    now: float | None = None,
    progress: ProgressSink = NULL_PROGRESS,
) -> list[dict[str, Any]]:
    """``orphans --recursive``: one listing of the prefix, then every checkpoint under it planned
    on ``engine`` (this machine or Spark); plans (or errors) in path order."""
    found = find_checkpoints(storage.list_all(progress))
    if not found:
        from ckpt_cli.errors import NotACheckpoint

        raise NotACheckpoint(
            f"{storage.url}: no checkpoint under this prefix",
            hint="a checkpoint is a directory with a metadata file and offsets/ or commits/",
        )
    units = sorted(found.items())
    settings = _ScanSettings(storage, retain, min_age, time.time() if now is None else now)
    results: list[dict[str, Any]] = engine.map(
        _scan_one, units, initializer=_init_scan, initargs=(settings,)
    )
    return results
