"""``sources/<n>``: each source's own log, read as the source reads it on restart.

The file source's log (``FileStreamSourceLog``, with compact files) is read as far as a
restart and the next batch read it; Kafka's and the rate source's initial offset file as
those sources read it. Each source's offset in the two newest offsets entries says which
log batches the next batch reads.
"""

from __future__ import annotations

from ckpt_cli.core.model import CheckpointFile, FileKind
from ckpt_cli.errors import FormatError, TruncatedFileError, UnsupportedVersionError
from ckpt_cli.formats import logs
from ckpt_cli.validate.codes import (
    CORRUPT_FILE,
    CORRUPT_OFFSETS,
    EMPTY_FILE,
    ERROR,
    MISSING_SOURCE_LOG,
    TRUNCATED_FILE,
    UNSUPPORTED_VERSION,
    WARNING,
)
from ckpt_cli.validate.context import ValidationRun
from ckpt_cli.validate.files import sidecar_findings


def check_sources(run: ValidationRun) -> None:
    """``sources/<n>``: each source's log read as the source reads it when the query
    restarts, and each source's offset in the latest offsets entry checked against it."""
    dirs: dict[int, dict[str, CheckpointFile]] = {}
    for f in run.ckpt.of_kind(FileKind.SOURCE_LOG):
        parts = f.path.split("/")
        # Spark lists only names that parse as a batch id (n or n.compact).
        if len(parts) == 3 and parts[1].isdigit() and f.batch is not None:
            dirs.setdefault(int(parts[1]), {})[parts[2]] = f
    if not dirs:
        return
    latest = run.ckpt.batches.latest_offsets
    end_seq = _readable_offsets(run, latest)
    start_seq = _readable_offsets(run, latest - 1 if latest is not None else None)
    for source, files in sorted(dirs.items()):
        end = _source_offset(end_seq, source)
        start = _source_offset(start_seq, source)
        if _is_file_source(run, files, end, start):
            _check_file_source(run, source, files, latest, end, start)
        else:
            _check_initial_offset(run, source, files, end, start)


def _readable_offsets(run: ValidationRun, batch: int | None) -> logs.OffsetSeq | None:
    if batch is None or batch not in run.ckpt.batches.offsets:
        return None
    try:
        return run.ckpt.offsets(batch)
    except FormatError:
        return None  # reported by check_logs


def _read_source_file(run: ValidationRun, f: CheckpointFile, severity: str) -> bytes | None:
    """The bytes of a source log file (None, with a finding, for an empty file); its
    checksum sidecars are verified on the way."""
    if f.entry.size == 0:
        run.add(EMPTY_FILE, f"{f.path}: empty file", [f.path], severity=severity)
        return None
    data = run.ckpt.storage.read_bytes(f.path)
    sidecars = [(c.path, c.kind) for c in run.ckpt.sidecars_of(f.path)]
    run.sidecars_checked.add(f.path)
    # Spark's local FileContext reads do not check .crc files (a restart on a stale one
    # succeeds), but a mismatch still means the file or its checksum changed after Spark
    # wrote it, and validate cannot tell which: an error, as for every other checksum.
    for code, message, paths in sidecar_findings(run.ckpt.storage, f.path, sidecars, data):
        run.add(code, message, paths)
    return data


def _is_file_source(
    run: ValidationRun, files: dict[str, CheckpointFile], end: str | None, start: str | None
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
    head = run.ckpt.storage.read_bytes(f.path)[:4096]
    return not head.startswith(b"\x00") and b"\n{" in head


def _check_initial_offset(
    run: ValidationRun,
    source: int,
    files: dict[str, CheckpointFile],
    end: str | None,
    start: str | None,
) -> None:
    """Kafka's and the rate source's ``sources/<n>/0``. Kafka reads it only while the
    source has no offset yet; the rate source reads its start time from it every run."""
    f = files.get("0")
    if f is None:
        return  # the source writes it again
    kafka_has_offsets = _is_json_object(end) and _is_json_object(start)
    severity = WARNING if kafka_has_offsets else ERROR
    data = _read_source_file(run, f, severity)
    if data is None:
        return
    try:
        logs.parse_source_initial_offset(f.path, data)
    except UnsupportedVersionError as exc:
        run.add(UNSUPPORTED_VERSION, str(exc), [f.path], severity=severity, source=source)
    except FormatError as exc:
        run.add(CORRUPT_FILE, str(exc), [f.path], severity=severity, source=source)


def _check_file_source(
    run: ValidationRun,
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
        if f.batch is not None and name.endswith(".compact") == _is_compaction(f.batch, interval):
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
        run.add(CORRUPT_OFFSETS, str(exc), [exc.path], source=source)
    wanted: list[int] = []
    if end_id is not None:
        low = start_id if start_id is not None else -1
        if low > end_id:
            run.add(
                CORRUPT_OFFSETS,
                f"{offsets_path}: file source {source} logOffset {end_id} is below "
                f"offsets/{low} of the batch before (Spark asserts start <= end)",
                [offsets_path],
                source=source,
            )
        wanted = list(range(low + 1, end_id + 1))
    restart |= {b for b in wanted if b in by_id}
    to_read = sorted(b for b in by_id if run.every or b in restart)
    run.ckpt.storage.prefetch([by_id[b].path for b in to_read])
    compact_entries: tuple[logs.FileSourceEntry, ...] = ()
    for b in to_read:
        f = by_id[b]
        severity = ERROR if b in restart else WARNING
        data = _read_source_file(run, f, severity)
        if data is None:
            continue
        try:
            entries = logs.parse_file_source_log(f.path, data)
        except TruncatedFileError as exc:
            run.add(TRUNCATED_FILE, str(exc), [f.path], severity=severity, source=source)
        except UnsupportedVersionError as exc:
            run.add(UNSUPPORTED_VERSION, str(exc), [f.path], severity=severity, source=source)
        except FormatError as exc:
            run.add(CORRUPT_FILE, str(exc), [f.path], severity=severity, source=source)
        else:
            if b == first:
                compact_entries = entries
            _check_source_entries(run, source, f, entries)
    for b in range(first, newest + 1):
        if b not in by_id:
            path = f"{base}/{b}.compact" if _is_compaction(b, interval) else f"{base}/{b}"
            run.add(
                MISSING_SOURCE_LOG,
                f"{path}: missing; on restart the file source reads log batches "
                f"{first}-{newest} (its latest compact file and every batch after it)",
                [path],
                source=source,
                batch=b,
            )
    in_compact = {e.batch_id for e in compact_entries}
    gone = [b for b in wanted if b not in by_id and b not in in_compact and b not in restart]
    if gone:
        run.add(
            MISSING_SOURCE_LOG,
            f"{offsets_path}: file source {source}'s offset names log "
            f"batch{'es' if len(gone) > 1 else ''} {', '.join(map(str, gone))}, which "
            f"{base} does not have (Spark fails reading the batch)",
            [offsets_path, base],
            source=source,
            batches=gone,
        )


def _check_source_entries(
    run: ValidationRun, source: int, f: CheckpointFile, entries: tuple[logs.FileSourceEntry, ...]
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
    shown = ", ".join(map(str, lost[:5])) + (f" and {len(lost) - 5} more" if len(lost) > 5 else "")
    code = TRUNCATED_FILE if lost[-1] == f.batch else CORRUPT_FILE
    run.add(
        code,
        f"{f.path}: no file entries of batch{'es' if len(lost) > 1 else ''} {shown}; the "
        "file source would read their files again as new input",
        [f.path],
        severity=WARNING,
        source=source,
    )


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
