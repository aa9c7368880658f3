"""``ckpt batches``: the query's story, one row per batch, from ``offsets/``, ``commits/``
and the sources' own logs.

Each ``offsets/<batch>`` entry is what Spark planned for the batch: ``batchTimestampMs`` (when
it was planned), ``batchWatermarkMs`` and one offset per source, as the source wrote it. A
``commits/<batch>`` entry says the batch finished. Sources are told apart by their offsets:

* the file source (``{"logOffset": N}``): the batch read the files its log
  (``sources/<i>/<n>``, or a ``.compact`` file holding it) lists for the log batches after the
  previous batch's ``logOffset`` up to N;
* Kafka (``{"topic": {"partition": offset}}``): the offsets per topic-partition and the
  change since the previous batch (the records the batch read);
* ``LongOffset`` (a bare number: the ``rate`` source counts seconds since its start) and
  everything else: the JSON as written, with the change of a number.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ckpt_cli.core.model import Checkpoint, FileKind
from ckpt_cli.errors import CkptError, FormatError
from ckpt_cli.formats import logs
from ckpt_cli.results import Report
from ckpt_cli.units import iso_ms, seconds_since, watermark_iso


@dataclass(frozen=True)
class TopicPartition:
    topic: str
    partition: int
    offset: int
    change: int | None  # since the previous batch; None when the partition is new or unknown


@dataclass(frozen=True)
class SourceProgress:
    """One source's offset in one batch."""

    source: int  # position in the plan (log v1) or the id OffsetMap names (log v2)
    kind: str  # file | kafka | rate | long | other | none (no offset yet: Spark's "-")
    offset: Any  # the offset JSON as Spark wrote it, parsed
    # file: the log batches read and the files they list; None when unknown (the previous
    # batch's offsets entry is gone, or the log is).
    log_batches: list[int] | None = None
    files_added: int | None = None
    files: list[str] | None = None
    # kafka: per topic-partition offsets, and the records read (the sum of the changes).
    partitions: list[TopicPartition] | None = None
    records: int | None = None
    change: int | None = None  # long, rate: the change of the number since the previous batch
    # rate: when the query started (sources/<i>/0); its offset counts seconds since then.
    started: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The fields of its kind (None ones left out, but for ``offset``)."""
        out = {k: v for k, v in asdict(self).items() if v is not None}
        return {**out, "offset": self.offset}


@dataclass(frozen=True)
class BatchRow:
    batch: int
    # committed | in-flight (planned after the last commit: Spark re-runs it) | not-committed
    # (planned, no commit, a later batch committed) | offsets-missing (a hole in offsets/)
    state: str
    committed: bool
    planned_ms: int | None  # batchTimestampMs
    planned: str | None
    age_seconds: float | None  # how long ago it was planned
    watermark_ms: int | None  # batchWatermarkMs
    watermark: str | None
    sources: list[SourceProgress] = field(default_factory=list)
    problem: str | None = None  # the offsets entry cannot be read


@dataclass(frozen=True)
class BatchesReport(Report):
    """Every batch the logs know in the range asked for, oldest first."""

    checkpoint: str
    latest_offsets: int | None
    latest_committed: int | None
    in_flight: list[int]
    offsets_gaps: list[int]
    commits_gaps: list[int]
    batches: list[BatchRow]

    def body_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["batches"] = [
            {**asdict(row), "sources": [s.to_json() for s in row.sources]} for row in self.batches
        ]
        return out


def batch_timeline(
    checkpoint: Checkpoint,
    *,
    last: int | None = None,
    since: int | None = None,
    until: int | None = None,
    now_ms: int | None = None,
) -> BatchesReport:
    """The batches ``since``..``until`` (inclusive; default: all the logs hold), the ``last``
    of them only when given."""
    if last is not None and last < 1:
        raise CkptError(f"last={last}: expected a number of batches of at least 1")
    b = checkpoint.batches
    known = sorted(set(b.offsets) | set(b.commits))
    ids = list(range(known[0], known[-1] + 1)) if known else []
    ids = [i for i in ids if (since is None or i >= since) and (until is None or i <= until)]
    if last is not None:
        ids = ids[-last:]
    checkpoint.storage.prefetch([f"offsets/{i}" for i in ids if i in b.offsets])
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    reader = _SourceLogs(checkpoint)
    rows: list[BatchRow] = []
    previous = _readable(checkpoint, ids[0] - 1) if ids else None
    for batch in ids:
        row, seq = _row(checkpoint, batch, previous, reader, now)
        rows.append(row)
        previous = seq
    return BatchesReport(
        checkpoint=checkpoint.storage.url,
        latest_offsets=b.latest_offsets,
        latest_committed=b.latest_committed,
        in_flight=list(b.in_flight),
        offsets_gaps=list(b.offsets_gaps),
        commits_gaps=list(b.commits_gaps),
        batches=rows,
    )


def _readable(checkpoint: Checkpoint, batch: int) -> logs.OffsetSeq | None:
    if batch not in checkpoint.batches.offsets:
        return None
    try:
        return checkpoint.offsets(batch)
    except FormatError:
        return None


def _state(checkpoint: Checkpoint, batch: int) -> str:
    b = checkpoint.batches
    if batch in b.commits:
        return "committed" if batch in b.offsets else "offsets-missing"
    if batch not in b.offsets:
        return "offsets-missing"
    return "in-flight" if batch in b.in_flight else "not-committed"


def _row(
    checkpoint: Checkpoint,
    batch: int,
    previous: logs.OffsetSeq | None,
    reader: _SourceLogs,
    now: int,
) -> tuple[BatchRow, logs.OffsetSeq | None]:
    state = _state(checkpoint, batch)
    committed = batch in checkpoint.batches.commits
    empty = BatchRow(batch, state, committed, None, None, None, None, None)
    if batch not in checkpoint.batches.offsets:
        return empty, None
    try:
        seq = checkpoint.offsets(batch)
    except FormatError as exc:
        return BatchRow(**{**asdict(empty), "problem": str(exc)}), None
    planned = seq.batch_timestamp_ms
    before = dict(_keyed(previous)) if previous is not None else {}
    sources = [_source(reader, key, text, before.get(key)) for key, text in _keyed(seq)]
    return BatchRow(
        batch=batch,
        state=state,
        committed=committed,
        planned_ms=planned,
        planned=iso_ms(planned),
        age_seconds=seconds_since(planned, now / 1000),  # as the headline's last activity
        watermark_ms=seq.batch_watermark_ms,
        watermark=watermark_iso(seq.batch_watermark_ms),
        sources=sources,
    ), seq


def _keyed(seq: logs.OffsetSeq) -> list[tuple[int, str | None]]:
    """(source, offset text) in plan order: OffsetMap names its sources, v1 numbers them."""
    if seq.source_ids is not None:
        return [
            (int(k) if k.isdigit() else i, v)
            for i, (k, v) in enumerate(zip(seq.source_ids, seq.source_offsets, strict=False))
        ]
    return list(enumerate(seq.source_offsets))


def _source(
    reader: _SourceLogs,
    source: int,
    text: str | None,
    before: str | None,
) -> SourceProgress:
    if text is None:
        return SourceProgress(source, "none", None)
    value = json.loads(text)
    if isinstance(value, dict) and "logOffset" in value:
        return _file_source(reader, source, text, before, value)
    previous = _json(before)
    if _is_kafka(value):
        parts = []
        for topic, offsets in sorted(value.items()):
            old = previous.get(topic, {}) if _is_kafka(previous) else {}
            for part, offset in sorted(offsets.items(), key=lambda kv: int(kv[0])):
                change = offset - old[part] if isinstance(old.get(part), int) else None
                parts.append(TopicPartition(topic, int(part), offset, change))
        changes = [p.change for p in parts]
        records = sum(c for c in changes if c is not None) if None not in changes else None
        return SourceProgress(source, "kafka", value, partitions=parts, records=records)
    if isinstance(value, int) and not isinstance(value, bool):
        change = value - previous if isinstance(previous, int) else None
        started = reader.rate_start(source)
        if started is not None:
            return SourceProgress(source, "rate", value, change=change, started=iso_ms(started))
        return SourceProgress(source, "long", value, change=change)
    return SourceProgress(source, "other", value)


def _json(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _is_kafka(value: Any) -> bool:
    """KafkaSourceOffset's JSON: {"topic": {"partition": offset, ...}, ...}."""
    return (
        isinstance(value, dict)
        and bool(value)
        and all(
            isinstance(parts, dict)
            and all(k.lstrip("-").isdigit() and isinstance(v, int) for k, v in parts.items())
            for parts in value.values()
        )
    )


def _file_source(
    reader: _SourceLogs, source: int, text: str, before: str | None, value: dict[str, Any]
) -> SourceProgress:
    path = f"sources/{source}"
    end = logs.parse_file_source_offset(path, text)
    if before is None:
        return SourceProgress(source, "file", value)
    try:
        start = logs.parse_file_source_offset(path, before)
    except FormatError:
        return SourceProgress(source, "file", value)
    batches = list(range(start + 1, end + 1))
    files = reader.files(source, batches)
    return SourceProgress(
        source,
        "file",
        value,
        log_batches=batches,
        files_added=len(files) if files is not None else None,
        files=files,
    )


class _SourceLogs:
    """A file source's log, read as needed: ``sources/<i>/<n>``, else the first compact file
    after it (a compact file holds every entry up to its batch)."""

    def __init__(self, checkpoint: Checkpoint) -> None:
        self.checkpoint = checkpoint
        self.names: dict[int, dict[int, str]] = {}  # source -> log batch -> file name
        for f in checkpoint.of_kind(FileKind.SOURCE_LOG):
            parts = f.path.split("/")
            if len(parts) == 3 and parts[1].isdigit() and f.batch is not None:
                self.names.setdefault(int(parts[1]), {})[f.batch] = f.path
        self.parsed: dict[str, tuple[logs.FileSourceEntry, ...] | None] = {}

    def _entries(self, path: str) -> tuple[logs.FileSourceEntry, ...] | None:
        if path not in self.parsed:
            try:
                data = self.checkpoint.storage.read_bytes(path)
                self.parsed[path] = logs.parse_file_source_log(path, data)
            except FormatError:
                self.parsed[path] = None  # validate reports it
        return self.parsed[path]

    def rate_start(self, source: int) -> int | None:
        """The start time (epoch ms) the rate source keeps in ``sources/<i>/0`` ("v1", then
        the number); None when that is not what the file holds."""
        path = self.names.get(source, {}).get(0)
        if path is None or len(self.names[source]) != 1:
            return None
        try:
            body = logs.parse_source_initial_offset(path, self.checkpoint.storage.read_bytes(path))
        except FormatError:
            return None
        return int(body) if body.isdigit() else None

    def files(self, source: int, batches: list[int]) -> list[str] | None:
        names = self.names.get(source, {})
        out: list[str] = []
        for batch in batches:
            path = names.get(batch) or next(
                (names[n] for n in sorted(names) if n > batch and names[n].endswith(".compact")),
                None,
            )
            entries = self._entries(path) if path is not None else None
            if entries is None:
                return None
            out.extend(e.path for e in entries if e.batch_id == batch)
        return out
