"""``ckpt validate``: will this query restart, and if not, why?

The rules work from the one listing and read only what they need:

* the root ``metadata``; the latest offsets entry and the one before it (Spark reads both to
  restart a batch), the latest commit; every log entry with ``--all-versions``/``--deep``;
* per store partition, the state version a restart loads (the latest committed batch + 1, or
  ``--batch N`` + 1, or every retained version), planned the way Spark loads it
  (``state.plan_version``), and every file of those plans decoded end to end, with the
  checksum sidecars that cover them; ``--deep`` decodes every state file in the checkpoint;
* with ``--all-versions``/``--deep``, the lineage line of every retained format-v2 changelog
  (against the commit log's uniqueIds and the files present: a rollback, a replay or the
  change feed follows it as Spark does, even where a zip of its version hides it from a
  restart);
* in every scope, the files no version needs, as info (decided by ``retention``, as
  ``ckpt orphans`` decides): files of attempts the commit log did not choose, SSTs/logs no
  zip names. The restart scope reads the commits of versions with several attempts only, and
  the older zips of partitions with few of them (``RESTART_SCOPE_ZIP_READS``).

Findings carry a stable code, a severity, the paths, a message and a hint. The reading of
files runs in a pool: threads for I/O, processes for ``--deep`` decoding of many files.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ckpt_cli.engine import Engine, LocalEngine
from ckpt_cli.errors import (
    CkptError,
    FormatError,
    LimitExceededError,
    TruncatedFileError,
    UnsupportedVersionError,
    unsupported_hint,
)
from ckpt_cli.formats import checksums, compression, logs, records, rocksdb
from ckpt_cli.formats.schema import parse_state_schema
from ckpt_cli.model import Checkpoint, CheckpointFile, FileKind, Partition
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.replay.plan import (
    ReplayPlan,
    StateUnavailable,
    codec_of,
    plan_version,
    read_changelog_header,
    version_unique_id,
)
from ckpt_cli.replay.read import WHOLE_ZIP_BYTES, read_zip_metadata
from ckpt_cli.retention import unchosen_attempt, untracked_shared_files
from ckpt_cli.storage import Storage

ERROR, WARNING, INFO = "error", "warning", "info"
# Restart scope: to see which SSTs/logs no zip names, the older zips of a partition are read
# when there are at most this many (settling it can take every one of them: a partition with
# more is left to --all-versions, and its unnamed files are counted in the stats).
RESTART_SCOPE_ZIP_READS = 3
SEVERITY_RANK = {INFO: 0, WARNING: 1, ERROR: 2}

# code -> (default severity, hint). The severity of some codes depends on where they occur.
CODES: dict[str, tuple[str, str]] = {
    "MISSING_METADATA": (
        ERROR,
        "the root metadata file holds the query id; restore it from a backup, or start the "
        "query on a new checkpoint",
    ),
    "CORRUPT_METADATA": (ERROR, 'restore the metadata file from a backup ({"id":"<uuid>"})'),
    "CORRUPT_OFFSETS": (
        ERROR,
        "Spark fails reading this entry; ckpt repair can roll the logs back to the last good batch",
    ),
    "CORRUPT_COMMIT": (
        ERROR,
        "Spark fails reading this entry; ckpt repair can roll the logs back to the last good batch",
    ),
    "UNKNOWN_LOG_VERSION": (
        ERROR,
        "written by a newer Spark than ckpt knows; run the query with that Spark or upgrade ckpt",
    ),
    "COMMIT_WITHOUT_OFFSETS": (
        ERROR,
        "a commit entry has no offsets entry; the logs were edited or copied partially",
    ),
    "BATCH_GAP": (WARNING, "log entries are missing inside the retained range"),
    "UNCOMMITTED_BATCH": (
        INFO,
        "Spark re-runs the last planned batch on restart; nothing to do",
    ),
    "MISSING_STATE_FILE": (
        ERROR,
        "restore the file from a backup, or restart from an older batch whose state is "
        "complete (ckpt validate --all-versions shows which ones)",
    ),
    "MISSING_SST": (ERROR, "restore the SST from a backup; the version cannot be loaded"),
    "SST_SIZE_MISMATCH": (
        ERROR,
        "Spark refuses a version whose SST size differs from its zip's metadata; restore the file",
    ),
    "LINEAGE_MISMATCH": (
        ERROR,
        "the commit log's uniqueIds and the changelog lineage disagree; Spark fails with "
        "CANNOT_LOAD_STATE_STORE",
    ),
    "MISSING_UNIQUE_ID_FILE": (
        ERROR,
        "the commit log names a state file version that is not in the checkpoint",
    ),
    "UNKNOWN_UNIQUE_ID": (
        INFO,
        "the commit recording this version's uniqueId is purged (normal: Spark keeps state "
        "files back to a snapshot, and commits only minBatchesToRetain back); not checked",
    ),
    "PARTITION_COUNT_MISMATCH": (
        ERROR,
        "the number of state partitions must stay equal to spark.sql.shuffle.partitions of the "
        "first run",
    ),
    "TEMP_FILE": (
        WARNING,
        "left by an interrupted write; Spark ignores it, ckpt cleanup removes it",
    ),
    "EMPTY_FILE": (ERROR, "a zero-byte file where Spark wrote content; restore it or roll back"),
    "TRUNCATED_FILE": (
        ERROR,
        "the file ends before its end marker (an interrupted copy or write); restore it",
    ),
    "CORRUPT_FILE": (ERROR, "the file cannot be decoded; restore it from a backup"),
    "MISSING_SOURCE_LOG": (
        ERROR,
        "the file source reads this log batch on restart and fails without it; restore it from "
        "a backup",
    ),
    "LIMIT_EXCEEDED": (
        ERROR,
        "the file inflates or lists more than ckpt's safety limits allow (a decompression "
        "bomb?); if it is genuine, raise the limit named in the message and run again",
    ),
    # Not corruption: a version header ckpt does not know. An error all the same, because
    # ckpt could not check what Spark needs from the file.
    "UNSUPPORTED_VERSION": (ERROR, unsupported_hint()),
    "ZIP_METADATA_V2": (
        INFO,
        "Spark 4.0 restarts from these zips; Spark 4.1 and later expect 'v1' and fail with "
        "CANNOT_LOAD_STATE_STORE.CANNOT_READ_CHECKPOINT, so keep this query on Spark 4.0",
    ),
    "CRC_MISMATCH": (
        ERROR,
        "the file or its checksum changed after Spark wrote it (Hadoop's FileSystem and RocksDB's "
        "file manager refuse such a file); if the file itself is right, ckpt repair rewrites the "
        "checksum",
    ),
    "ORPHAN_FILE": (
        INFO,
        "no retained version needs it; `ckpt orphans` lists such files (and why any is kept), "
        "`ckpt cleanup` removes them",
    ),
    "MISSING_SCHEMA": (
        WARNING,
        "Spark rewrites a missing schema file, but state cannot be decoded without it",
    ),
    "CORRUPT_SCHEMA": (ERROR, "Spark fails reading the state schema; restore it from a backup"),
    "UNKNOWN_FILE": (INFO, "not a file Spark writes in a checkpoint"),
    "SYMLINK": (
        WARNING,
        "ckpt does not follow symbolic links to directories, and cleanup/repair never change "
        "anything through a link; replace the link with what it points to for a full check",
    ),
}

# Findings of a file missing from the listing: under a linked directory (which the listing does
# not enter) or at a dangling link, they are counted by that link's SYMLINK finding instead.
_MISSING_CODES = frozenset(
    {
        "MISSING_SST",
        "MISSING_STATE_FILE",
        "MISSING_UNIQUE_ID_FILE",
        "MISSING_SOURCE_LOG",
        "MISSING_METADATA",
        "BATCH_GAP",
    }
)


@dataclass
class Finding:
    code: str
    severity: str
    message: str
    paths: list[str] = field(default_factory=list)
    hint: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "paths": self.paths,
            "message": self.message,
            "hint": self.hint,
            **self.details,
        }


@dataclass
class ValidationReport:
    checkpoint: str
    target: dict[str, Any]
    findings: list[Finding]
    stats: dict[str, Any]

    def at_or_above(self, severity: str) -> list[Finding]:
        rank = SEVERITY_RANK[severity]
        return [f for f in self.findings if SEVERITY_RANK[f.severity] >= rank]

    def to_json(self, fail_on: str = ERROR) -> dict[str, Any]:
        counts = {s: sum(1 for f in self.findings if f.severity == s) for s in SEVERITY_RANK}
        return {
            "ok": not self.at_or_above(fail_on),
            "checkpoint": self.checkpoint,
            "target": self.target,
            "counts": counts,
            "findings": [f.to_json() for f in self.findings],
            "stats": self.stats,
        }


# -- reading files (runs in a pool) ------------------------------------------------------------


@dataclass(frozen=True)
class FileTask:
    """One file to decode end to end, with the checksum sidecars that cover it."""

    path: str
    kind: FileKind
    size: int
    codec: str
    sidecars: tuple[tuple[str, FileKind], ...] = ()
    deep: bool = False  # zips: also rebuild the RocksDB and iterate it
    shared: tuple[tuple[str, int], ...] = ()  # zips: SST/log paths present, with sizes


@dataclass
class FileResult:
    path: str
    findings: list[tuple[str, str, list[str]]] = field(default_factory=list)  # code, msg, paths
    zip_metadata: rocksdb.RocksDBCheckpointMetadata | None = None
    bytes_read: int = 0
    reads: int = 0


def check_file(storage: Storage, task: FileTask) -> FileResult:
    """Decode ``task.path`` to its end and verify its sidecars; problems become findings."""
    result = FileResult(task.path)
    # One request per file where it fits in memory: the same bytes are decoded and checked
    # against the sidecars (object-store requests cost money); large files are streamed.
    # A large zip whose bytes nothing else needs is read by range for its metadata.
    ranged_zip = (
        task.kind is FileKind.ZIP
        and not task.deep
        and not task.sidecars
        and task.size > WHOLE_ZIP_BYTES
    )
    whole = 0 < task.size <= _READ_WHOLE_BYTES and not ranged_zip
    data = storage.read_bytes(task.path) if whole else None
    try:
        if task.size == 0:
            result.findings.append(("EMPTY_FILE", f"{task.path}: empty file", [task.path]))
        elif task.kind in (FileKind.DELTA, FileKind.SNAPSHOT, FileKind.CHANGELOG):
            _decode_stream(storage, task, data)
        elif task.kind is FileKind.ZIP:
            result.zip_metadata = _decode_zip(storage, task, data)
        elif task.kind is FileKind.STATE_SCHEMA:
            parse_state_schema(task.path, data or storage.read_bytes(task.path))
        if task.sidecars and task.size:
            _verify_sidecars(storage, task, result, data)
    except FormatError as exc:
        result.findings.append((format_error_code(exc, task.kind), str(exc), [task.path]))
    except StateUnavailable as exc:
        result.findings.append((exc.reason, exc.message, list(exc.paths)))
    return result


def format_error_code(exc: FormatError, kind: FileKind | None = None) -> str:
    """The finding code for a file that could not be read: damage only where ckpt knows it is
    damage (a version it does not read, or a file beyond its limits, is not)."""
    if isinstance(exc, TruncatedFileError):
        return "TRUNCATED_FILE"
    if isinstance(exc, LimitExceededError):
        return "LIMIT_EXCEEDED"
    if isinstance(exc, UnsupportedVersionError):
        return "UNSUPPORTED_VERSION"
    return "CORRUPT_SCHEMA" if kind is FileKind.STATE_SCHEMA else "CORRUPT_FILE"


def _decode_stream(storage: Storage, task: FileTask, data: bytes | None) -> None:
    with contextlib.ExitStack() as stack:
        fh = (
            io.BytesIO(data)
            if data is not None
            else stack.enter_context(storage.open_stream(task.path))
        )
        chunks = compression.decompressed_chunks(task.path, fh, codec=task.codec)
        if task.kind is FileKind.CHANGELOG:
            for _ in records.open_changelog(task.path, chunks).records():
                pass
        else:
            snapshot = task.kind is FileKind.SNAPSHOT
            for _ in records.iter_kv_records(task.path, chunks, snapshot=snapshot):
                pass


def _decode_zip(
    storage: Storage, task: FileTask, data: bytes | None
) -> rocksdb.RocksDBCheckpointMetadata:
    if data is None and not task.deep:
        return read_zip_metadata(storage, task.path, task.size)
    if data is None:
        data = storage.read_bytes(task.path)
    meta = rocksdb.read_zip(task.path, data).metadata
    if not task.deep:
        return meta
    present = dict(task.shared)
    store_dir = task.path.rsplit("/", 1)[0]
    for subdir, files in (("SSTs", meta.sst_files), ("logs", meta.log_files)):
        for f in files:
            path = f"{store_dir}/{subdir}/{f.dfs_file_name}"
            if present.get(path) != f.size_bytes:
                return meta  # reported from the listing; RocksDB cannot be rebuilt
    with tempfile.TemporaryDirectory(prefix="ckpt-validate-") as tmp:
        rocksdb.rebuild_db_dir(
            data, lambda rel: storage.read_bytes(f"{store_dir}/{rel}"), tmp, path=task.path
        )
        count = sum(1 for _ in rocksdb.iter_db(tmp, path=task.path))
    keys_known = meta.num_keys is not None and meta.num_keys >= 0
    if keys_known and not meta.uses_column_families and count != meta.num_keys:
        raise FormatError(
            task.path, f"metadata says numKeys={meta.num_keys}, its SSTs hold {count} keys"
        )
    return meta


def _verify_sidecars(
    storage: Storage, task: FileTask, result: FileResult, data: bytes | None
) -> None:
    if data is None:
        data = storage.read_bytes(task.path)
    result.findings.extend(_sidecar_findings(storage, task.path, task.sidecars, data))


def _sidecar_findings(
    storage: Storage, covered: str, sidecars: Iterable[tuple[str, FileKind]], data: bytes
) -> list[tuple[str, str, list[str]]]:
    """CRC_MISMATCH findings for the sidecars of ``covered`` whose checksums ``data`` fails."""
    found: list[tuple[str, str, list[str]]] = []
    for path, kind in sidecars:
        raw = storage.read_bytes(path)
        try:
            if kind is FileKind.HADOOP_CRC:
                problem = checksums.verify_hadoop_crc(checksums.parse_hadoop_crc(path, raw), data)
            else:
                problem = checksums.verify_spark_checksum(
                    checksums.parse_spark_checksum(path, raw), data
                )
        except FormatError as exc:
            problem = exc.problem
        if problem:
            found.append(("CRC_MISMATCH", f"{path}: {problem} (covers {covered})", [path, covered]))
    return found


def _source_offset(seq: logs.OffsetSeq | None, source: int) -> str | None:
    """Source ``source``'s offset JSON in an offsets entry (None: none, or "-")."""
    if seq is None:
        return None
    if seq.source_ids is not None:  # OffsetMap (log v2) names its sources
        named = dict(zip(seq.source_ids, seq.source_offsets, strict=False))
        return named.get(str(source))
    return seq.source_offsets[source] if source < len(seq.source_offsets) else None


def _is_json_object(text: str | None) -> bool:
    return text is not None and text.lstrip().startswith("{")


def _is_file_source_offset(text: str | None) -> bool:
    return text is not None and '"logOffset"' in text


def _is_compaction(batch: int, interval: int) -> bool:
    return (batch + 1) % interval == 0


def _compact_interval(compacts: list[int]) -> int:
    """CompactibleFileStreamLog.compactInterval from the compact files present (newest first),
    with the default spark.sql.streaming.fileSource.log.compactInterval."""
    default = logs.DEFAULT_FILE_SOURCE_COMPACT_INTERVAL
    if len(compacts) >= 2 and compacts[0] > compacts[1]:
        return compacts[0] - compacts[1]
    if len(compacts) == 1:  # deriveCompactInterval
        n = compacts[0] + 1
        if n <= default or default >= n // 2:
            return n
        return next((i for i in range(default, n // 2 + 1) if n % i == 0), n)
    return default


_WORKER_STORAGE: Storage | None = None
_READ_WHOLE_BYTES = 64 << 20


def _init_worker(storage: Storage) -> None:
    global _WORKER_STORAGE
    _WORKER_STORAGE = storage


def _check_in_worker(task: FileTask) -> FileResult:
    """In a worker process: its own storage, so it counts its own requests."""
    assert _WORKER_STORAGE is not None
    stats = _WORKER_STORAGE.stats
    before = (stats.read_calls, stats.bytes_read)
    result = check_file(_WORKER_STORAGE, task)
    result.reads = stats.read_calls - before[0]
    result.bytes_read = stats.bytes_read - before[1]
    return result


# -- the rules -----------------------------------------------------------------------------------


class _Validator:
    def __init__(
        self,
        ckpt: Checkpoint,
        *,
        batch: int | None,
        all_versions: bool,
        deep: bool,
        workers: int | None,
        progress: ProgressSink,
        engine: Engine | None = None,
    ) -> None:
        self.ckpt = ckpt
        self.engine: Engine = engine or LocalEngine(workers)
        self.batch = batch
        self.all_versions = all_versions
        self.deep = deep
        self.workers = workers
        self.progress = progress
        self.findings: list[Finding] = []
        self.needed_logs: set[str] = set()
        self.tasks: dict[str, FileTask] = {}
        self.versions_checked = 0
        # Restart scope: SST/log files the zips read within the budget leave unnamed.
        self.orphans_unresolved = 0
        self.zip_metadata: dict[str, rocksdb.RocksDBCheckpointMetadata] = {}
        # Changelogs whose lineage is checked: one read and one finding each.
        self._lineage_checked: set[str] = set()
        self._by_path = {f.path: f for f in ckpt.files}
        self._sidecars: dict[str, list[CheckpointFile]] = {}
        self._sidecars_checked: set[str] = set()  # verified outside the pool (source logs)
        # Files Spark would read that are behind a symbolic link (not listed), by link.
        self._behind_links: dict[str, set[str]] = {}
        for f in ckpt.of_kind(FileKind.HADOOP_CRC, FileKind.SPARK_CHECKSUM):
            if f.target:
                self._sidecars.setdefault(f.target, []).append(f)

    def add(
        self,
        code: str,
        message: str,
        paths: Iterable[str] = (),
        *,
        severity: str | None = None,
        **details: Any,
    ) -> None:
        default, hint = CODES[code]
        self.findings.append(
            Finding(code, severity or default, message, list(paths), hint, details)
        )

    # metadata and logs ------------------------------------------------------------------

    def check_metadata(self) -> None:
        if self.ckpt.metadata_file is None:
            self.add("MISSING_METADATA", "metadata: missing (the query id file)", ["metadata"])
            return
        try:
            _ = self.ckpt.query_id
        except FormatError as exc:
            self.add("CORRUPT_METADATA", str(exc), ["metadata"])
            return
        if "metadata" in self._sidecars:
            self._queue(self.ckpt.metadata_file)

    def _read_log(self, kind: str, batch: int) -> bool:
        path = f"{kind}/{batch}"
        entry = self.ckpt.listing.get(path)
        code = "CORRUPT_OFFSETS" if kind == "offsets" else "CORRUPT_COMMIT"
        if entry is not None and entry.size == 0:
            self.add("EMPTY_FILE", f"{path}: empty file (Spark cannot parse it)", [path])
            return False
        try:
            if kind == "offsets":
                self.ckpt.offsets(batch)
            else:
                self.ckpt.commit(batch)
        except UnsupportedVersionError as exc:
            self.add("UNKNOWN_LOG_VERSION", str(exc), [path])
            return False
        except FormatError as exc:
            self.add(code, str(exc), [path])
            return False
        # Hadoop refuses a log entry whose .crc does not match (a hand-edited file).
        f = self._by_path.get(path)
        if f is not None and path in self._sidecars:
            self._queue(f)
        return True

    def check_logs(self) -> None:
        b = self.ckpt.batches
        offsets, commits = b.offsets, b.commits
        every = self.all_versions or self.deep
        wanted_offsets: list[int] = []
        if offsets:
            latest = offsets[-1]
            wanted = {latest, latest - 1} if not every else set(offsets)
            if self.batch is not None:
                wanted |= {self.batch, self.batch - 1}
            wanted_offsets = sorted(wanted & set(offsets))
        wanted_commits = ([commits[-1]] if not every else list(commits)) if commits else []
        # Many small log files: on object stores, fetched together rather than one by one.
        self.ckpt.storage.prefetch(
            [f"offsets/{x}" for x in wanted_offsets] + [f"commits/{x}" for x in wanted_commits]
        )
        for batch in wanted_offsets:
            self.needed_logs.add(f"offsets/{batch}")
            self._read_log("offsets", batch)
        for batch in wanted_commits:
            self.needed_logs.add(f"commits/{batch}")
            self._read_log("commits", batch)
        # Commits whose batch was never planned (within the offsets' retained range).
        if offsets:
            stray = [c for c in commits if c >= offsets[0] and c not in set(offsets)]
            for c in stray:
                self.add(
                    "COMMIT_WITHOUT_OFFSETS",
                    f"commits/{c}: batch {c} has a commit but no offsets entry",
                    [f"commits/{c}"],
                    batch=c,
                )
        # Holes: an offsets hole just below the latest batch breaks a restart.
        if offsets:
            for gap in b.offsets_gaps:
                restart_needs = gap >= offsets[-1] - 1
                self.add(
                    "BATCH_GAP",
                    f"offsets/{gap}: missing between offsets/{offsets[0]} and "
                    f"offsets/{offsets[-1]}",
                    [f"offsets/{gap}"],
                    severity=ERROR if restart_needs else WARNING,
                    batch=gap,
                )
        for gap in b.commits_gaps:
            self.add(
                "BATCH_GAP",
                f"commits/{gap}: missing between commits/{commits[0]} and commits/{commits[-1]}",
                [f"commits/{gap}"],
                batch=gap,
            )
        in_flight = b.in_flight
        if in_flight:
            many = len(in_flight) > 1
            self.add(
                "UNCOMMITTED_BATCH",
                (
                    f"batches {', '.join(map(str, in_flight))} have offsets but no commit; "
                    "Spark only re-runs the last one"
                    if many
                    else f"batch {in_flight[0]} is planned (offsets/{in_flight[0]}) but not "
                    "committed; Spark re-runs it on restart"
                ),
                [f"offsets/{x}" for x in in_flight],
                severity=ERROR if many else INFO,
                batches=list(in_flight),
            )

    # sources --------------------------------------------------------------------------

    def check_sources(self) -> None:
        """``sources/<n>``: each source's log read as the source reads it when the query
        restarts, and each source's offset in the latest offsets entry checked against it."""
        dirs: dict[int, dict[str, CheckpointFile]] = {}
        for f in self.ckpt.of_kind(FileKind.SOURCE_LOG):
            parts = f.path.split("/")
            # Spark lists only names that parse as a batch id (n or n.compact).
            if len(parts) == 3 and parts[1].isdigit() and f.batch is not None:
                dirs.setdefault(int(parts[1]), {})[parts[2]] = f
        if not dirs:
            return
        latest = self.ckpt.batches.latest_offsets
        end_seq = self._readable_offsets(latest)
        start_seq = self._readable_offsets(latest - 1 if latest is not None else None)
        for source, files in sorted(dirs.items()):
            end = _source_offset(end_seq, source)
            start = _source_offset(start_seq, source)
            if self._is_file_source(files, end, start):
                self._check_file_source(source, files, latest, end, start)
            else:
                self._check_initial_offset(source, files, end, start)

    def _readable_offsets(self, batch: int | None) -> logs.OffsetSeq | None:
        if batch is None or batch not in self.ckpt.batches.offsets:
            return None
        try:
            return self.ckpt.offsets(batch)
        except FormatError:
            return None  # reported by check_logs

    def _read_source_file(self, f: CheckpointFile, severity: str) -> bytes | None:
        """The bytes of a source log file (None, with a finding, for an empty file); its
        checksum sidecars are verified on the way."""
        if f.entry.size == 0:
            self.add("EMPTY_FILE", f"{f.path}: empty file", [f.path], severity=severity)
            return None
        data = self.ckpt.storage.read_bytes(f.path)
        sidecars = [(c.path, c.kind) for c in self._sidecars.get(f.path, ())]
        self._sidecars_checked.add(f.path)
        # Spark's local FileContext reads do not check .crc files (a restart on a stale one
        # succeeds), but a mismatch still means the file or its checksum changed after Spark
        # wrote it, and validate cannot tell which: an error, as for every other checksum.
        for code, message, paths in _sidecar_findings(self.ckpt.storage, f.path, sidecars, data):
            self.add(code, message, paths)
        return data

    def _is_file_source(
        self, files: dict[str, CheckpointFile], end: str | None, start: str | None
    ) -> bool:
        if any(name.endswith(".compact") for name in files) or set(files) - {"0"}:
            return True  # only the file source log has compact files or several batches
        if _is_file_source_offset(end) or _is_file_source_offset(start):
            return True
        # A lone sources/<n>/0: Kafka's starts with a zero byte, the rate source's second line
        # is a bare number; a file source log's second line is a FileEntry object.
        f = files.get("0")
        if f is None or f.entry.size == 0:
            return end is None or _is_file_source_offset(end)
        head = self.ckpt.storage.read_bytes(f.path)[:4096]
        return not head.startswith(b"\x00") and b"\n{" in head

    def _check_initial_offset(
        self, source: int, files: dict[str, CheckpointFile], end: str | None, start: str | None
    ) -> None:
        """Kafka's and the rate source's ``sources/<n>/0``. Kafka reads it only while the
        source has no offset yet; the rate source reads its start time from it every run."""
        f = files.get("0")
        if f is None:
            return  # the source writes it again
        kafka_has_offsets = _is_json_object(end) and _is_json_object(start)
        severity = WARNING if kafka_has_offsets else ERROR
        data = self._read_source_file(f, severity)
        if data is None:
            return
        try:
            logs.parse_source_initial_offset(f.path, data)
        except UnsupportedVersionError as exc:
            self.add("UNKNOWN_LOG_VERSION", str(exc), [f.path], severity=severity, source=source)
        except FormatError as exc:
            self.add("CORRUPT_FILE", str(exc), [f.path], severity=severity, source=source)

    def _check_file_source(
        self,
        source: int,
        files: dict[str, CheckpointFile],
        latest: int | None,
        end: str | None,
        start: str | None,
    ) -> None:
        """FileStreamSource on restart (FileStreamSourceLog): ``getLatest`` reads the newest
        batch file, ``restore``/``allFiles`` the latest compact file and every batch after it,
        and ``getBatch`` the batches between the source's offsets in the two newest offsets
        entries (a batch file that is gone is looked up in the latest compact file)."""
        base = f"sources/{source}"
        by_id: dict[int, CheckpointFile] = {}
        for _, f in sorted(files.items()):
            assert f.batch is not None
            # Both "9" and "9.compact": Spark opens the one its compact interval names.
            by_id.setdefault(f.batch, f)
        compacts = sorted(
            (f.batch for n, f in files.items() if n.endswith(".compact") and f.batch is not None),
            reverse=True,
        )
        interval = _compact_interval(compacts)
        for name, f in files.items():
            if f.batch is not None and name.endswith(".compact") == _is_compaction(
                f.batch, interval
            ):
                by_id[f.batch] = f
        newest = max(by_id)
        first = max(0, (newest + 1) // interval * interval - 1)  # getAllValidBatches
        restart = set(range(first, newest + 1))
        offsets_path = f"offsets/{latest}"
        end_id = start_id = None
        try:
            if end is not None:
                end_id = logs.parse_file_source_offset(offsets_path, end)
            if start is not None and latest is not None:
                start_id = logs.parse_file_source_offset(f"offsets/{latest - 1}", start)
        except FormatError as exc:
            self.add("CORRUPT_OFFSETS", str(exc), [exc.path], source=source)
        wanted: list[int] = []
        if end_id is not None:
            low = start_id if start_id is not None else -1
            if low > end_id:
                self.add(
                    "CORRUPT_OFFSETS",
                    f"{offsets_path}: file source {source} logOffset {end_id} is below "
                    f"offsets/{low} of the batch before (Spark asserts start <= end)",
                    [offsets_path],
                    source=source,
                )
            wanted = list(range(low + 1, end_id + 1))
        restart |= {b for b in wanted if b in by_id}
        every = self.all_versions or self.deep
        to_read = sorted(b for b in by_id if every or b in restart)
        self.ckpt.storage.prefetch([by_id[b].path for b in to_read])
        compact_entries: tuple[logs.FileSourceEntry, ...] = ()
        for b in to_read:
            f = by_id[b]
            severity = ERROR if b in restart else WARNING
            data = self._read_source_file(f, severity)
            if data is None:
                continue
            try:
                entries = logs.parse_file_source_log(f.path, data)
            except TruncatedFileError as exc:
                self.add("TRUNCATED_FILE", str(exc), [f.path], severity=severity, source=source)
            except UnsupportedVersionError as exc:
                self.add(
                    "UNKNOWN_LOG_VERSION", str(exc), [f.path], severity=severity, source=source
                )
            except FormatError as exc:
                self.add("CORRUPT_FILE", str(exc), [f.path], severity=severity, source=source)
            else:
                if b == first:
                    compact_entries = entries
                self._check_source_entries(source, f, entries)
        for b in range(first, newest + 1):
            if b not in by_id:
                path = f"{base}/{b}.compact" if _is_compaction(b, interval) else f"{base}/{b}"
                self.add(
                    "MISSING_SOURCE_LOG",
                    f"{path}: missing; on restart the file source reads log batches "
                    f"{first}-{newest} (its latest compact file and every batch after it)",
                    [path],
                    source=source,
                    batch=b,
                )
        in_compact = {e.batch_id for e in compact_entries}
        gone = [b for b in wanted if b not in by_id and b not in in_compact and b not in restart]
        if gone:
            self.add(
                "MISSING_SOURCE_LOG",
                f"{offsets_path}: file source {source}'s offset names log "
                f"batch{'es' if len(gone) > 1 else ''} {', '.join(map(str, gone))}, which "
                f"{base} does not have (Spark fails reading the batch)",
                [offsets_path, base],
                source=source,
                batches=gone,
            )

    def _check_source_entries(
        self, source: int, f: CheckpointFile, entries: tuple[logs.FileSourceEntry, ...]
    ) -> None:
        """A log that parses but lost whole lines (cut at a line end): FileStreamSource logs a
        batch only when it has files, numbering batches 0, 1, 2...; a compact file holds every
        batch up to its own, a batch file only its own. Spark restarts on such a log, but
        re-reads the files it lost as new input, and a re-run of a lost batch reads nothing."""
        assert f.batch is not None
        compact = f.path.endswith(".compact")
        ids = {e.batch_id for e in entries}
        expected = set(range(f.batch + 1)) if compact else {f.batch}
        lost = sorted(expected - ids)
        if not lost:
            return
        shown = ", ".join(map(str, lost[:5])) + (
            f" and {len(lost) - 5} more" if len(lost) > 5 else ""
        )
        code = "TRUNCATED_FILE" if lost[-1] == f.batch else "CORRUPT_FILE"
        self.add(
            code,
            f"{f.path}: no file entries of batch{'es' if len(lost) > 1 else ''} {shown}; the "
            "file source would read their files again as new input",
            [f.path],
            severity=WARNING,
            source=source,
        )

    # state ----------------------------------------------------------------------------

    def target_version(self) -> int | None:
        if self.batch is not None:
            return self.batch + 1
        latest = self.ckpt.batches.latest_committed
        return latest + 1 if latest is not None else None

    def _shuffle_partitions(self) -> int | None:
        try:
            latest = self.ckpt.latest_offsets
        except FormatError:
            return None
        return latest.shuffle_partitions if latest else None

    def check_state(self) -> None:
        ops = self.ckpt.operators
        expected = self._shuffle_partitions()
        counts: dict[str, int] = {}
        for op in ops.values():
            for store in op.stores.values():
                counts[f"{op.path}:{store.name}"] = len(store.partitions)
        target = self.target_version()
        for op in ops.values():
            self._check_operator_metadata(op.id)
            self._check_schema(op.id)
            for store in op.stores.values():
                ids = sorted(store.partitions)
                want = expected if expected is not None else max(counts.values())
                missing = [p for p in range(want) if p not in store.partitions]
                extra = [p for p in ids if p >= want]
                # A partition directory that is a symbolic link is not listed: its SYMLINK
                # finding says so, rather than a wrong count.
                unlinked = [p for p in missing if self._link_of(f"{op.path}/{p}") is None]
                if unlinked or extra:
                    where = f"{op.path} store {store.name}"
                    self.add(
                        "PARTITION_COUNT_MISMATCH",
                        f"{where}: {len(ids)} partitions, expected {want}"
                        + (f"; missing {', '.join(map(str, unlinked))}" if unlinked else "")
                        + (f"; unexpected {', '.join(map(str, extra))}" if extra else ""),
                        [op.path],
                        operator=op.id,
                        store=store.name,
                    )
                if target and not self.all_versions:
                    self._prefetch_lineage(store.partitions.values(), {target})
                every = self.all_versions or self.deep
                if every:
                    self._prefetch_lineage(store.partitions.values(), None)
                for part in store.partitions.values():
                    if every:
                        self._check_retained_changelogs(op.id, store.name, part)
                    versions: list[int] = []
                    if self.all_versions:
                        versions = [v for v in part.version_ids if target is None or v <= target]
                        self._prefetch_lineage([part], set(versions))
                    elif target:
                        versions = [target]
                    for v in versions:
                        self._check_version(op.id, store.name, part.id, v)
                for pid in missing:
                    if target:
                        path = f"{op.path}/{pid}" + (
                            f"/{store.name}" if store.name != "default" else ""
                        )
                        self.add(
                            "MISSING_STATE_FILE",
                            f"{path}: no state files at all; version {target} cannot be loaded",
                            [path],
                            operator=op.id,
                            store=store.name,
                            partition=pid,
                            version=target,
                        )

    def _prefetch_lineage(self, parts: Iterable[Partition], versions: set[int] | None) -> None:
        """Checkpoint format v2 plans read each version's changelog lineage line: on object
        stores, fetch those heads together rather than one after another (None: every
        version's)."""
        self.ckpt.storage.prefetch(
            [
                f.path
                for part in parts
                for f in part.files
                if f.kind is FileKind.CHANGELOG
                and f.unique_id is not None
                and (versions is None or f.version in versions)
            ],
            heads=True,
        )

    def _check_version(self, op: int, store: str, part: int, version: int) -> None:
        self.versions_checked += 1
        try:
            plan = plan_version(self.ckpt, op, part, version, store=store)
        except StateUnavailable as exc:
            code = exc.reason if exc.reason in CODES else "MISSING_STATE_FILE"
            self.add(
                code,
                exc.message,
                exc.paths,
                operator=op,
                store=store,
                partition=part,
                version=version,
            )
            return
        except UnsupportedVersionError as exc:  # a changelog header of an unknown version
            self.add("UNSUPPORTED_VERSION", str(exc), [exc.path], version=version)
            return
        except FormatError as exc:  # a changelog whose header cannot be read
            self.add("CORRUPT_FILE", str(exc), [exc.path], version=version)
            return
        if plan.unique_id is not None:
            self._check_lineage(plan)
        for f in plan.files:
            self._queue(f)

    def _check_lineage(self, plan: ReplayPlan) -> None:
        """Format v2: each changelog's lineage names the ids the commit log recorded."""
        for step in plan.steps:
            self._check_changelog_lineage(plan.operator, plan.store, plan.partition, step)

    def _unique_id(self, op: int, store: str, part: int, version: int) -> str | None:
        try:
            return version_unique_id(self.ckpt, op, store, part, version)
        except CkptError:
            return None  # an unreadable commit is reported by check_logs

    def _check_retained_changelogs(self, op: int, store: str, part: Partition) -> None:
        """Every retained format-v2 changelog: a rollback, a replay from an older snapshot or
        the change feed follows its lineage (as Spark does), even where a zip of the same
        version hides it from a restart. Files of attempts the commit log did not choose are
        orphans (Spark never reads them; ``check_orphans`` reports them)."""
        for f in part.files:
            if f.kind is not FileKind.CHANGELOG or f.unique_id is None or f.version is None:
                continue
            if self._unchosen(op, store, part.id, f) is None:
                self._check_changelog_lineage(op, store, part.id, f)

    def _unchosen(self, op: int, store: str, pid: int, f: CheckpointFile) -> str | None:
        try:
            return unchosen_attempt(self.ckpt, op, store, pid, f)
        except CkptError:
            return None  # an unreadable commit is reported by check_logs

    def _check_changelog_lineage(self, op: int, store: str, pid: int, f: CheckpointFile) -> None:
        assert f.version is not None
        if f.path in self._lineage_checked:
            return
        self._lineage_checked.add(f.path)
        try:
            lineage = read_changelog_header(self.ckpt, f).lineage or ()
        except FormatError:
            self._queue(f)  # decoding it reports what is wrong
            return
        part = self.ckpt.operators[op].stores[store].partitions[pid]
        for entry in lineage:
            w, named = entry.version, entry.unique_id
            if w >= f.version:
                continue
            sv = part.versions.get(w)
            carried = sv.unique_ids if sv else []
            recorded = self._unique_id(op, store, pid, w)
            if recorded is not None and recorded != named:
                where = (
                    f"{w}_{named} is a file of an attempt the commit log did not choose; Spark "
                    "follows the lineage, so a load through it reads that attempt's state"
                    if named in carried
                    else "no file has that id; Spark follows the lineage, so a load of this "
                    "version from an older snapshot, or a change feed through it, fails"
                )
                message = (
                    f"{f.path}: lineage says version {w} is {named}, commits/{w - 1} says "
                    f"{recorded}; {where}"
                )
                paths = [f.path, f"commits/{w - 1}"]
            elif recorded is None and carried and named not in carried:
                # The commit is purged, but the files of that version are still here.
                message = (
                    f"{f.path}: lineage says version {w} is {named}, and no file of version {w} "
                    f"has that id (they carry {', '.join(carried)}); Spark follows the lineage, "
                    "so a load of this version from an older snapshot, or a change feed "
                    "through it, fails"
                )
                paths = [f.path]
            else:
                continue
            self.add(
                "LINEAGE_MISMATCH",
                message,
                paths,
                operator=op,
                store=store,
                partition=pid,
                version=f.version,
                lineage_version=w,
                lineage_unique_id=named,
                commit_unique_id=recorded,
            )

    def _check_operator_metadata(self, op: int) -> None:
        """``state/<op>/_metadata/metadata`` (v1) and ``_metadata/v2/<batch>`` (v2,
        transformWithState), as Spark 4.3 reads them on the first batch of a restart
        (IncrementalExecution's StateSchemaAndOperatorMetadataRule). It catches an error
        reading the v1 file and only logs "Error reading metadata path for stateful
        operator", so an unreadable v1 file does not stop a restart; transformWithState reads
        the newest v2 file for its state schema paths (SchemaValidationUtils.
        validateAndWriteStateSchema, uncaught) and fails on an unreadable one, and ignores the
        older ones (all checked with real restarts)."""
        files = self.ckpt.operators[op].metadata_files
        v2 = {
            int(name): f
            for f in files
            if f.path.startswith(f"state/{op}/_metadata/v2/")
            and (name := f.path.rsplit("/", 1)[1]).isdigit()
        }
        newest_v2 = v2[max(v2)] if v2 else None
        for f in files:
            if f.path == f"state/{op}/_metadata/metadata":
                severity, effect = (
                    WARNING,
                    "Spark logs a warning and restarts without it (it does not rewrite it, "
                    "and cannot check the new plan's operators against it)",
                )
            elif f is newest_v2:
                severity, effect = (
                    ERROR,
                    "transformWithState reads its state schema paths from the newest one on "
                    "restart, and fails",
                )
            elif f in v2.values():
                severity, effect = WARNING, "Spark reads only the newest one on restart"
            else:
                continue  # not a file Spark reads here
            if f.entry.size == 0:
                self.add(
                    "EMPTY_FILE",
                    f"{f.path}: empty operator metadata file; {effect}",
                    [f.path],
                    severity=severity,
                    operator=op,
                )
                continue
            try:
                logs.parse_operator_metadata(f.path, self.ckpt.storage.read_bytes(f.path))
            except FormatError as exc:
                self.add(
                    "CORRUPT_FILE",
                    f"{exc}; {effect}",
                    [f.path],
                    severity=severity,
                    operator=op,
                )

    def _check_schema(self, op: int) -> None:
        operator = self.ckpt.operators[op]
        for store in operator.stores.values():
            files = list(store.schema_files) or [
                f for f in operator.schema_files if f"/_stateSchema/{store.name}/" in f"/{f.path}/"
            ]
            wheres = (
                f"{operator.path}/0/_metadata/schema",
                f"{operator.path}/0/{store.name}/_metadata/schema",
                f"{operator.path}/_stateSchema/{store.name}/",
            )
            linked = [(link, w) for w in wheres if (link := self._link_of(w)) is not None]
            if not files and linked:
                link, where = linked[0]
                self._behind_links.setdefault(link, set()).add(where.rstrip("/"))
            elif not files:
                self.add(
                    "MISSING_SCHEMA",
                    f"{operator.path}: store {store.name} has no schema file",
                    [operator.path],
                    operator=op,
                    store=store.name,
                )
            for f in files:
                self._queue(f)

    @functools.cached_property
    def _shared_by_dir(self) -> dict[str, tuple[tuple[str, int], ...]]:
        """SSTs/logs present, with sizes, by store directory (one pass over the listing, not
        one per zip)."""
        found: dict[str, list[tuple[str, int]]] = {}
        for e in self.ckpt.listing:
            parts = e.path.rsplit("/", 2)
            if len(parts) == 3 and parts[1] in ("SSTs", "logs"):
                found.setdefault(parts[0], []).append((e.path, e.size))
        return {d: tuple(files) for d, files in found.items()}

    def _queue(self, f: CheckpointFile) -> None:
        if f.path in self.tasks:
            return
        sidecars = tuple((c.path, c.kind) for c in self._sidecars.get(f.path, ()))
        shared: tuple[tuple[str, int], ...] = ()
        if self.deep and f.kind is FileKind.ZIP and f.store is not None:
            # Only a deep check rebuilds the RocksDB from them.
            shared = self._shared_by_dir.get(f.path.rsplit("/", 1)[0], ())
        self.tasks[f.path] = FileTask(
            f.path, f.kind, f.entry.size, codec_of(self.ckpt), sidecars, self.deep, shared
        )

    # files ----------------------------------------------------------------------------

    def check_files(self) -> None:
        for f in self.ckpt.temp_files:
            self.add(
                "TEMP_FILE",
                f"{f.path}: temp file of an interrupted write"
                + (f" of {f.target}" if f.target else ""),
                [f.path],
            )
        for f in self.ckpt.of_kind(FileKind.SST, FileKind.ROCKSDB_LOG):
            if f.entry.size == 0:
                # RocksDB uploads with copyFromLocalFile under the final name: a killed upload
                # leaves an empty file (seen in the spark4-crash-rocksdb-sst fixture).
                self.add(
                    "EMPTY_FILE",
                    f"{f.path}: empty RocksDB file, left by an interrupted upload; no version "
                    "can use it",
                    [f.path],
                    severity=WARNING,
                )
        for f in self.ckpt.unknown_files:
            self.add("UNKNOWN_FILE", f"{f.path}: not a file Spark writes", [f.path])
        paths = {f.path for f in self.ckpt.files}
        for f in self.ckpt.of_kind(FileKind.HADOOP_CRC, FileKind.SPARK_CHECKSUM):
            if f.target and f.target not in paths:
                self.add(
                    "ORPHAN_FILE",
                    f"{f.path}: checksum of {f.target}, which is not in the checkpoint",
                    [f.path],
                )
        if self.deep:
            for f in self.ckpt.of_kind(
                FileKind.DELTA, FileKind.SNAPSHOT, FileKind.CHANGELOG, FileKind.ZIP
            ):
                self._queue(f)
            # Every other file a checksum sidecar covers (operator metadata, schemas, SSTs,
            # RocksDB logs, source logs): Hadoop refuses to read one whose .crc differs.
            for target in self._sidecars:
                covered = self._by_path.get(target)
                if (
                    covered is not None
                    and covered.entry.size > 0
                    and covered.kind not in (FileKind.TEMP, FileKind.UNKNOWN)
                    and target not in self._sidecars_checked
                ):
                    self._queue(covered)
            for f in self.ckpt.of_kind(FileKind.OFFSETS, FileKind.COMMIT, FileKind.METADATA):
                if f.entry.size == 0 and f.path not in self.needed_logs:
                    self.add("EMPTY_FILE", f"{f.path}: empty file", [f.path], severity=WARNING)
        for f in self.ckpt.of_kind(FileKind.OFFSETS, FileKind.COMMIT):
            if f.entry.size == 0 and f.path not in self.needed_logs and not self.deep:
                self.add("EMPTY_FILE", f"{f.path}: empty file", [f.path], severity=WARNING)

    def run_file_checks(self) -> tuple[int, int]:
        tasks = list(self.tasks.values())
        if not tasks:
            return 0, 0
        self.progress.start("Reading state files", total=len(tasks))
        reads = nbytes = 0
        v2_zips: list[str] = []
        try:
            for result in self._map(tasks):
                reads += result.reads
                nbytes += result.bytes_read
                for code, message, paths in result.findings:
                    self.add(code, message, paths)
                if result.zip_metadata is not None:
                    self.zip_metadata[result.path] = result.zip_metadata
                    self._check_zip_files(result.path, result.zip_metadata)
                    if result.zip_metadata.version == 2:
                        v2_zips.append(result.path)
                self.progress.advance()
        finally:
            self.progress.close()
        if v2_zips:
            v2_zips.sort()
            self.add(
                "ZIP_METADATA_V2",
                f"{v2_zips[0]}"
                + (f" and {len(v2_zips) - 1} more zips" if len(v2_zips) > 1 else "")
                + ": RocksDB checkpoint metadata v2, as Spark 4.0 writes it in checkpoint "
                "format v2 (healthy)",
                v2_zips,
            )
        return reads, nbytes

    def _map(self, tasks: list[FileTask]) -> Iterable[FileResult]:
        storage = self.ckpt.storage
        cores = os.cpu_count() or 1
        # Decoding local files is CPU work under the GIL: processes keep every core busy.
        # Object stores are latency-bound, where threads overlap the requests.
        cpu_bound = storage.is_local and len(tasks) >= 64 and cores > 1
        if isinstance(self.engine, LocalEngine) and not cpu_bound:
            return self.engine.map(functools.partial(check_file, storage), tasks)
        return self.engine.map(
            _check_in_worker,
            tasks,
            cpu_bound=True,
            initializer=_init_worker,
            initargs=(storage,),
        )

    def _link_of(self, path: str) -> str | None:
        """The symbolic link ``path`` is, or is under (None: none)."""
        links = self.ckpt.listing.symlinks
        if not links:
            return None
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            if prefix in links:
                return prefix
        return None

    def check_symlinks(self) -> None:
        """One SYMLINK finding per symbolic link in the checkpoint (local disk). The listing
        does not enter linked directories, so files Spark reads through one look missing:
        those findings are taken back and counted on the link. Hadoop's local file system
        reads through links, so the files behind a link that resolves are only unchecked;
        behind a dangling link Spark cannot read them: an error."""
        links = self.ckpt.listing.symlinks
        if not links:
            return
        behind: dict[str, set[str]] = {
            link: set(self._behind_links.get(link, ())) for link in links
        }
        kept: list[Finding] = []
        for finding in self.findings:
            link = (
                self._link_of(finding.paths[0])
                if finding.code in _MISSING_CODES and finding.paths
                else None
            )
            if link is None:
                kept.append(finding)
            else:
                behind[link].add(finding.paths[0])
        self.findings = kept
        for link, target in links.items():
            full = self.ckpt.storage.full_path(link)
            needed = sorted(behind[link])
            many = len(needed) > 1
            count = (
                f"{len(needed)} file{'s' if many else ''} the checkpoint needs "
                f"({needed[0]}{', ...' if many else ''}) {'are' if many else 'is'} behind it"
                if needed
                else ""
            )
            severity = WARNING
            if not os.path.exists(full):
                message = f"{link}: symbolic link to {target}, which does not exist; " + (
                    f"{count}, and Spark cannot read {'them' if many else 'it'}"
                    if needed
                    else "Spark and ckpt see no file there"
                )
                severity = ERROR if needed else WARNING
            elif os.path.isdir(full):
                message = (
                    f"{link}: symbolic link to the directory {target}; ckpt does not follow "
                    "links, so the files under it are not checked"
                    + (f" ({count}, unchecked)" if needed else "")
                    + "; cleanup and repair never change anything through it"
                )
            else:
                message = (
                    f"{link}: symbolic link to the file {target}; Spark and ckpt read it through "
                    "the link; cleanup and repair never change it or anything through it"
                )
            self.add(
                "SYMLINK",
                message,
                [link],
                severity=severity,
                target=target,
                files_behind=len(needed),
            )

    def check_orphans(self) -> None:
        """Files no retained version needs, as info, decided as ``ckpt orphans`` decides
        (``retention``): format-v2 files of attempts the commit log did not choose, and
        SSTs/logs no zip names (Spark keeps those until they are older than every file a zip
        names, so they can sit there unseen). Restart scope reads only the commits of
        versions with files of several attempts, and per partition only the zips it takes to
        name every SST/log present (the plans' zips are already read)."""
        every = self.all_versions or self.deep
        candidates: list[tuple[int, str, Partition, CheckpointFile]] = []
        for op in self.ckpt.operators.values():
            for store in op.stores.values():
                for part in store.partitions.values():
                    for sv in part.versions.values():
                        several = len(sv.files) > 1 and len(sv.unique_ids) > 1
                        if several or (every and sv.unique_ids):
                            candidates += [(op.id, store.name, part, f) for f in sv.files]
        versions = {f.version for *_, f in candidates if f.version is not None}
        self.ckpt.storage.prefetch(
            [f"commits/{v - 1}" for v in sorted(versions) if v - 1 in self.ckpt.batches.commits]
        )
        for op_id, store_name, part, f in candidates:
            chosen = self._unchosen(op_id, store_name, part.id, f)
            if chosen is not None and f.version is not None:
                self.add(
                    "ORPHAN_FILE",
                    f"{f.path}: written by a task attempt the commit log did not choose "
                    f"(commits/{f.version - 1} records {chosen}); Spark never reads it",
                    [f.path],
                    operator=op_id,
                    store=store_name,
                    partition=part.id,
                    version=f.version,
                    bytes=f.entry.size,
                )
        for op in self.ckpt.operators.values():
            for store in op.stores.values():
                self._check_untracked(op.id, store.name, list(store.partitions.values()))

    def _check_untracked(self, op: int, store: str, parts: list[Partition]) -> None:
        known = dict[str, rocksdb.RocksDBCheckpointMetadata | None](self.zip_metadata)
        every = self.all_versions or self.deep
        found = untracked_shared_files(
            self.ckpt.storage, parts, known, None if every else RESTART_SCOPE_ZIP_READS
        )
        for exc in found.unreadable.values():
            if exc.path in self.tasks:
                continue  # decoded by the pool, which reported it
            # A zip no other check reads (restart scope): a rollback to it fails.
            self.add(
                format_error_code(exc),
                f"{exc} (read to see which SSTs it names: a rollback to it fails, and which "
                "SSTs of its partition no zip names is unknown)",
                [exc.path],
                severity=WARNING,
                operator=op,
                store=store,
            )
        self.orphans_unresolved += sum(found.unresolved.values())
        by_path = {p.path: p for p in parts}
        for part_path, files in sorted(found.files.items()):
            for f in files:
                if f.entry.size == 0:
                    continue  # EMPTY_FILE says it (an interrupted upload)
                what = "SST" if f.kind is FileKind.SST else "RocksDB log"
                self.add(
                    "ORPHAN_FILE",
                    f"{f.path}: no zip names this {what} file ({f.entry.size} bytes); Spark "
                    "deletes it only once it is older than every file a zip names",
                    [f.path],
                    operator=op,
                    store=store,
                    partition=by_path[part_path].id,
                    bytes=f.entry.size,
                )

    def _check_zip_files(self, zip_path: str, meta: rocksdb.RocksDBCheckpointMetadata) -> None:
        store_dir = zip_path.rsplit("/", 1)[0]
        for subdir, files in (("SSTs", meta.sst_files), ("logs", meta.log_files)):
            for f in files:
                path = f"{store_dir}/{subdir}/{f.dfs_file_name}"
                entry = self.ckpt.listing.get(path)
                if entry is None:
                    self.add(
                        "MISSING_SST",
                        f"{path}: named by {zip_path} but not in the checkpoint",
                        [path, zip_path],
                    )
                elif entry.size != f.size_bytes:
                    self.add(
                        "SST_SIZE_MISMATCH",
                        f"{path}: {entry.size} bytes, {zip_path} records {f.size_bytes}",
                        [path, zip_path],
                    )


def validate(
    ckpt: Checkpoint,
    *,
    batch: int | None = None,
    all_versions: bool = False,
    deep: bool = False,
    workers: int | None = None,
    progress: ProgressSink = NULL_PROGRESS,
    engine: Engine | None = None,
) -> ValidationReport:
    """Check ``ckpt`` against every rule; see the module doc for what is read. ``engine``
    runs the file checks (default: this machine's threads or processes)."""
    started = time.perf_counter()
    before = (ckpt.storage.stats.read_calls, ckpt.storage.stats.bytes_read)
    if batch is not None and batch not in ckpt.batches.commits:
        committed = ckpt.batches.commits
        raise CkptError(
            f"{ckpt.storage.url}: batch {batch} has no commit in the checkpoint "
            f"(committed: {committed[0]}-{committed[-1]})"
            if committed
            else f"{ckpt.storage.url}: no committed batches"
        )
    ckpt.tolerant = True
    v = _Validator(
        ckpt,
        batch=batch,
        all_versions=all_versions,
        deep=deep,
        workers=workers,
        progress=progress,
        engine=engine,
    )
    v.check_metadata()
    v.check_logs()
    v.check_sources()
    v.check_state()
    v.check_files()
    pool_reads, pool_bytes = v.run_file_checks()
    v.check_orphans()
    v.check_symlinks()
    v.findings.sort(key=lambda f: (-SEVERITY_RANK[f.severity], f.code, f.paths))
    stats = ckpt.storage.stats
    target = v.target_version()
    return ValidationReport(
        checkpoint=ckpt.storage.url,
        target={
            "batch": target - 1 if target else None,
            "version": target,
            "scope": "all-versions" if all_versions else "restart",
            "deep": deep,
        },
        findings=v.findings,
        stats={
            "files_listed": len(ckpt.files),
            "files_checked": len(v.tasks),
            "versions_checked": v.versions_checked,
            "orphans_unresolved": v.orphans_unresolved,
            "list_calls": stats.list_calls,
            # Reads made in worker processes are counted by the workers.
            "files_read": stats.read_calls - before[0] + pool_reads,
            "bytes_read": stats.bytes_read - before[1] + pool_bytes,
            "seconds": round(time.perf_counter() - started, 3),
        },
    )


def junit_xml(report: ValidationReport, fail_on: str = ERROR) -> str:
    """JUnit XML for CI systems: one test case per rule code that ran, failing with its
    findings at or above ``fail_on``; findings below it are listed in system-out."""
    from xml.etree import ElementTree as ET

    failing_rank = SEVERITY_RANK[fail_on]
    suite = ET.Element(
        "testsuite",
        name="ckpt validate",
        tests=str(len(CODES)),
        time=str(report.stats.get("seconds", 0)),
    )
    failures = 0
    for code in CODES:
        found = [f for f in report.findings if f.code == code]
        case = ET.SubElement(suite, "testcase", classname=report.checkpoint, name=code)
        bad = [f for f in found if SEVERITY_RANK[f.severity] >= failing_rank]
        if bad:
            failures += 1
            failure = ET.SubElement(
                case, "failure", type=code, message=f"{len(bad)} finding(s): {bad[0].message}"
            )
            failure.text = "\n".join(
                f"[{f.severity}] {f.message}" + (f"\n  hint: {f.hint}" if f.hint else "")
                for f in bad
            )
        rest = [f for f in found if f not in bad]
        if rest:
            out = ET.SubElement(case, "system-out")
            out.text = "\n".join(f"[{f.severity}] {f.message}" for f in rest)
    suite.set("failures", str(failures))
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
