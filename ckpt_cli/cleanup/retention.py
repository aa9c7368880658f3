"""Retention: which files no retained version needs (``ckpt orphans``, and the plan of
``ckpt cleanup``).

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

import time

from ckpt_cli.change.safety import plan_warnings
from ckpt_cli.cleanup.partitions import partitions_beyond_count
from ckpt_cli.cleanup.plan import (
    CHECKSUM,
    LOST_ATTEMPT,
    OLD_LOG,
    OLD_PARTITION,
    OLD_SHARED,
    OLD_SOURCE_LOG,
    OLD_VERSION,
    ORPHAN_SHARED,
    PHASE,
    TEMP,
    CleanupPlan,
    Deletion,
    Skipped,
    delete_order,
)
from ckpt_cli.core.activity import DEFAULT_MIN_AGE_SECONDS, query_activity
from ckpt_cli.core.model import CHECKSUM_KINDS, Checkpoint, CheckpointFile, FileKind, Partition
from ckpt_cli.core.read import WHOLE_ZIP_BYTES, read_zip_metadata
from ckpt_cli.core.rebuild import StateUnavailable, plan_version
from ckpt_cli.core.untracked import unchosen_attempt, untracked_shared_files, zip_names
from ckpt_cli.errors import CkptError, FormatError
from ckpt_cli.formats import logs, rocksdb_zip
from ckpt_cli.units import natural_key

SPARK_DEFAULT_MIN_BATCHES_TO_RETAIN = 100


def retention_of(ckpt: Checkpoint, retain: int | None) -> tuple[int, str]:
    if retain is not None:
        if retain < 1:
            raise CkptError(f"retain={retain}: must be at least 1")
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
        self.skipped: list[Skipped] = []
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
        phase = covers.phase if covers is not None else PHASE[klass]
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
        beyond, kept = partitions_beyond_count(self.ckpt, self.retain)
        self.skipped.extend(kept)
        gone = {part.path for part, _ in beyond} | {k.path for k in kept}
        for part, reason in beyond:
            for f in part.files:
                self.add(f, OLD_PARTITION, reason)
        for op in self.ckpt.operators.values():
            for store in op.stores.values():
                for part in store.partitions.values():
                    if part.path not in gone:
                        self._plan_partition(op.id, store.name, part, top)

    def _plan_partition(self, op: int, store: str, part: Partition, top: int) -> None:
        first = max(1, top - self.retain)
        versions = [v for v in part.version_ids if first <= v <= top]
        if not versions:
            self.skipped.append(Skipped(part.path, f"no state version between {first} and {top}"))
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
                    Skipped(part.path, f"version {v} is not loadable: {exc.message}")
                )
                return
            except FormatError as exc:
                self.skipped.append(Skipped(part.path, str(exc)))
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

    def _zip_metadata(self, path: str) -> rocksdb_zip.RocksDBCheckpointMetadata:
        entry = self.ckpt.listing.get(path)
        return read_zip_metadata(self.ckpt.storage, path, entry.size if entry else None)

    def _plan_shared(self, part: Partition, kept_zips: list[CheckpointFile]) -> None:
        """SSTs/logs: needed when a kept zip names them."""
        named: set[str] = set()
        read: dict[str, rocksdb_zip.RocksDBCheckpointMetadata | None] = {}
        for z in kept_zips:
            try:
                meta = self._zip_metadata(z.path)
            except FormatError as exc:
                self.skipped.append(Skipped(part.path, f"cannot read {z.path}: {exc.problem}"))
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
            self.skipped.append(Skipped(part.path, f"cannot read {bad.path}: {bad.problem}"))
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
        sidecars = self.ckpt.of_kind(*CHECKSUM_KINDS)
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
        plan.deletions.sort(key=delete_order)
        plan.kept_young.sort(key=lambda d: natural_key(d.path))


def plan_cleanup(
    ckpt: Checkpoint,
    *,
    retain: int | None = None,
    min_age: float = DEFAULT_MIN_AGE_SECONDS,
    now: float | None = None,
    force: bool | None = None,
) -> CleanupPlan:
    """Decide what ``cleanup`` would delete; reads only the log entries and zips it needs.
    Never refuses for safety: that is :func:`apply_cleanup`'s to do.

    ``force``: given for a plan meant to be applied (``ckpt cleanup``, dry run or not), whose
    ``warnings`` then say what applying would refuse without it (a ``min_age`` below the
    default, an active query); None for a plan that is only a report (``ckpt orphans``).
    """
    # Cleaning a damaged checkpoint could make it worse: the logs must read (the error names
    # the file; `ckpt validate` and `ckpt repair` deal with damage).
    _ = ckpt.query_id, ckpt.latest_offsets, ckpt.latest_commit
    n, source = retention_of(ckpt, retain)
    now = time.time() if now is None else now
    plan = CleanupPlan(ckpt.storage.url, n, source, min_age, now, ckpt.batches.latest_committed)
    plan.activity = query_activity(ckpt, min_age=min_age, now=now)
    plan.warnings = plan_warnings(plan.activity, force=force)
    planner = _Planner(ckpt, n, min_age, now)
    planner.plan_temp()
    planner.plan_state()
    planner.plan_logs()
    planner.plan_checksums()
    planner.finish(plan)
    plan.skipped = planner.skipped
    plan.kept = sorted(planner.kept, key=lambda d: natural_key(d.path))
    _keep_symlinks(ckpt, plan)
    return plan


def _keep_symlinks(ckpt: Checkpoint, plan: CleanupPlan) -> None:
    """Symbolic links are never deleted, nor anything through them: a linked directory is not
    listed at all, a linked file stays; both are reported."""
    links = ckpt.listing.symlinks
    for rel, target in links.items():
        plan.skipped.append(
            Skipped(
                rel,
                f"a symbolic link (to {target}): ckpt does not follow links or delete through them",
            )
        )
    if links:
        plan.deletions = [d for d in plan.deletions if d.path not in links]
