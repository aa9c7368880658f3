"""The small text files of a checkpoint: ``metadata``, ``offsets/N``, ``commits/N`` and the
operator metadata ``state/<op>/_metadata/metadata``.

All but ``metadata`` use HDFSMetadataLog framing: a ``v<N>`` header line, then JSON lines,
with no trailing newline (docs/spark-checkpoint-format.md §1.3-§1.5, §8.2). Parsers take the
file's bytes and the path to name in errors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ckpt_cli.errors import (
    FormatError,
    TruncatedFileError,
    UnsupportedVersionError,
    unsupported_hint,
)

# Spark 3.5/4.x write offsets v1; a master snapshot has v2 (OffsetMap). Commits: v1, or v2 with
# checkpoint format v2. Operator metadata: v1, and v2 for transformWithState.
MAX_OFFSETS_VERSION = 2
MAX_COMMIT_VERSION = 2
MAX_OPERATOR_METADATA_VERSION = 2

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
PROVIDER_CLASS = "spark.sql.streaming.stateStore.providerClass"
COMPRESSION_CODEC = "spark.sql.streaming.stateStore.compression.codec"
CHECKPOINT_FORMAT_VERSION = "spark.sql.streaming.stateStore.checkpointFormatVersion"
MIN_BATCHES_TO_RETAIN = "spark.sql.streaming.minBatchesToRetain"


def _decode(path: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(path, f"not UTF-8 text ({exc.reason})", offset=exc.start) from exc


def _split_header(path: str, data: bytes, max_version: int, what: str) -> tuple[int, list[str]]:
    """Check the ``v<N>`` header line; return N and the remaining lines."""
    if not data:
        raise FormatError(path, f"empty file, expected a {what} starting with a 'v1' line")
    lines = _decode(path, data).split("\n")
    header = lines[0]
    if len(header) < 2 or header[0] != "v" or not header[1:].isdigit() or int(header[1:]) < 1:
        shown = header if len(header) <= 40 else header[:40] + "..."
        raise FormatError(path, f"expected a log version header like 'v1', found {shown!r}", line=1)
    version = int(header[1:])
    if version > max_version:
        raise UnsupportedVersionError(
            path,
            f"{what} version v{version} is unsupported (ckpt reads v1-v{max_version})",
            line=1,
            hint=unsupported_hint(),
        )
    return version, lines[1:]


def _json_line(path: str, text: str, line: int, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(path, f"{what} is not valid JSON: {exc.msg}", line=line) from exc
    except RecursionError:
        # Spark's Jackson also refuses it (StreamReadConstraints: at most 1000 levels).
        raise FormatError(path, f"{what} is JSON nested too deeply to read", line=line) from None


def _int_field(path: str, obj: dict[str, Any], key: str, line: int, default: int = 0) -> int:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise FormatError(path, f"{key} must be an integer, found {value!r}", line=line)
    return value


# -- metadata --------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamMetadata:
    """The root ``metadata`` file: the query id, stable across restarts."""

    query_id: str


def parse_stream_metadata(path: str, data: bytes) -> StreamMetadata:
    if not data.strip():
        raise FormatError(path, 'empty file, expected {"id":"<query id>"}')
    obj = _json_line(path, _decode(path, data), 1, "the query metadata")
    if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
        raise FormatError(path, 'expected a JSON object {"id":"<query id>"}', line=1)
    return StreamMetadata(obj["id"])


# -- offsets ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetSeq:
    """``offsets/<batch>``: what batch ``batch_id`` reads, and the confs pinned to the query."""

    batch_id: int
    log_version: int
    batch_watermark_ms: int
    batch_timestamp_ms: int
    conf: dict[str, str]
    # One entry per source in plan order: the offset JSON text, None for "-" (no offset yet).
    source_offsets: tuple[str | None, ...]
    # Log version 2 (OffsetMap) names each source; v1 identifies sources by position only.
    source_ids: tuple[str, ...] | None = None
    extra_metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def shuffle_partitions(self) -> int | None:
        value = self.conf.get(SHUFFLE_PARTITIONS)
        return int(value) if value is not None and value.isdigit() else None


def parse_offsets(path: str, batch_id: int, data: bytes) -> OffsetSeq:
    version, lines = _split_header(path, data, MAX_OFFSETS_VERSION, "offset log entry")
    if not lines:
        raise FormatError(path, "missing the metadata line after the header", line=2)
    meta_text = lines[0]
    meta: dict[str, Any] = {}
    if meta_text.strip():
        parsed = _json_line(path, meta_text, 2, "the batch metadata")
        if not isinstance(parsed, dict):
            raise FormatError(path, "the batch metadata must be a JSON object", line=2)
        meta = parsed
    conf = meta.get("conf", {})
    if not isinstance(conf, dict) or not all(isinstance(v, str) for v in conf.values()):
        raise FormatError(path, "conf must be a JSON object of strings", line=2)
    watermark = _int_field(path, meta, "batchWatermarkMs", 2)
    timestamp = _int_field(path, meta, "batchTimestampMs", 2)
    extra = {
        k: v for k, v in meta.items() if k not in ("batchWatermarkMs", "batchTimestampMs", "conf")
    }

    offsets: list[str | None] = []
    ids: list[str] = []
    for index, text in enumerate(lines[1:], start=3):
        value = text
        if version >= 2:
            source_id, sep, value = text.partition(":")
            if not sep:
                raise FormatError(
                    path, "expected 'sourceId:offset' in an OffsetMap log", line=index
                )
            ids.append(source_id)
        if value == "-":
            offsets.append(None)
            continue
        _json_line(path, value, index, f"the offset of source {index - 3}")
        offsets.append(value)
    return OffsetSeq(
        batch_id=batch_id,
        log_version=version,
        batch_watermark_ms=watermark,
        batch_timestamp_ms=timestamp,
        conf=dict(conf),
        source_offsets=tuple(offsets),
        source_ids=tuple(ids) if version >= 2 else None,
        extra_metadata=extra,
    )


# -- commits ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommitMetadata:
    """``commits/<batch>``: batch ``batch_id`` completed.

    ``state_unique_ids`` (checkpoint format v2) maps operator id -> partition -> store index ->
    the uniqueId of state store version ``batch_id + 1``.
    """

    batch_id: int
    log_version: int
    next_batch_watermark_ms: int
    state_unique_ids: dict[int, tuple[tuple[str, ...], ...]] | None


def parse_commit(path: str, batch_id: int, data: bytes) -> CommitMetadata:
    version, lines = _split_header(path, data, MAX_COMMIT_VERSION, "commit log entry")
    body: dict[str, Any] = {}
    if lines and lines[0].strip():
        parsed = _json_line(path, lines[0], 2, "the commit metadata")
        if not isinstance(parsed, dict):
            raise FormatError(path, "the commit metadata must be a JSON object", line=2)
        body = parsed
    watermark = _int_field(path, body, "nextBatchWatermarkMs", 2)
    ids: dict[int, tuple[tuple[str, ...], ...]] | None = None
    raw_ids = body.get("stateUniqueIds")
    if raw_ids is not None:
        if not isinstance(raw_ids, dict):
            raise FormatError(path, "stateUniqueIds must be a JSON object", line=2)
        ids = {}
        for op, partitions in raw_ids.items():
            if not str(op).isdigit() or not isinstance(partitions, list):
                raise FormatError(
                    path, f"stateUniqueIds[{op!r}] is not a list of partitions", line=2
                )
            rows: list[tuple[str, ...]] = []
            for stores in partitions:
                if not isinstance(stores, list) or not all(isinstance(s, str) for s in stores):
                    raise FormatError(
                        path, f"stateUniqueIds[{op!r}] must hold lists of uniqueId strings", line=2
                    )
                rows.append(tuple(stores))
            ids[int(op)] = tuple(rows)
    return CommitMetadata(batch_id, version, watermark, ids)


# -- operator metadata -----------------------------------------------------------------------


@dataclass(frozen=True)
class OperatorMetadata:
    """``state/<op>/_metadata/metadata`` (v1) or ``_metadata/v2/<batch>`` (Spark 4.0+)."""

    version: int
    operator_id: int
    operator_name: str
    # (store name, numColsPrefixKey, numPartitions) per store
    stores: tuple[tuple[str, int, int], ...]
    raw: dict[str, Any]


def parse_operator_metadata(path: str, data: bytes) -> OperatorMetadata:
    version, lines = _split_header(
        path, data, MAX_OPERATOR_METADATA_VERSION, "operator metadata file"
    )
    if not lines or not lines[0].strip():
        raise FormatError(path, "missing the operator metadata JSON after the header", line=2)
    obj = _json_line(path, "\n".join(lines), 2, "the operator metadata")
    info = obj.get("operatorInfo") if isinstance(obj, dict) else None
    if not isinstance(info, dict):
        raise FormatError(path, "expected an object with operatorInfo", line=2)
    stores_raw = obj.get("stateStoreInfo", [])
    if not isinstance(stores_raw, list):
        raise FormatError(path, "stateStoreInfo must be a list", line=2)
    stores = []
    for store in stores_raw:
        if not isinstance(store, dict):
            raise FormatError(path, "stateStoreInfo entries must be objects", line=2)
        stores.append(
            (
                str(store.get("storeName", "default")),
                _int_field(path, store, "numColsPrefixKey", 2),
                _int_field(path, store, "numPartitions", 2),
            )
        )
    return OperatorMetadata(
        version=version,
        operator_id=_int_field(path, info, "operatorId", 2),
        operator_name=str(info.get("operatorName", "")),
        stores=tuple(stores),
        raw=obj,
    )


# -- source logs -----------------------------------------------------------------------------

# FileStreamSourceLog.VERSION: FileStreamSource writes and accepts only v1.
FILE_SOURCE_LOG_VERSION = 1
# spark.sql.streaming.fileSource.log.compactInterval's default.
DEFAULT_FILE_SOURCE_COMPACT_INTERVAL = 10


@dataclass(frozen=True)
class FileSourceEntry:
    """One line of a file source log: FileStreamSource.FileEntry(path, timestamp, batchId)."""

    path: str
    timestamp: int
    batch_id: int


def _source_lines(text: str) -> list[str]:
    # Spark reads with Source.getLines (BufferedReader.readLine): \n, \r\n and \r end a line,
    # and a terminator at the very end adds no empty line.
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


def parse_file_source_log(path: str, data: bytes) -> tuple[FileSourceEntry, ...]:
    """``sources/<n>/<batch>`` or ``<batch>.compact`` of a file stream source.

    As ``CompactibleFileStreamLog.deserialize`` reads it: a ``v1`` line, then one JSON
    ``FileEntry`` per line; Spark parses every line, so any bad line fails the read. A last
    line cut off inside its JSON is reported as a :class:`TruncatedFileError`.
    """
    if not data:
        # Spark: IllegalStateException("Incomplete log file").
        raise FormatError(path, "empty file, expected a file source log starting with 'v1'")
    lines = _source_lines(_decode(path, data))
    _split_header(path, lines[0].encode(), FILE_SOURCE_LOG_VERSION, "file source log")
    entries: list[FileSourceEntry] = []
    last = len(lines)
    for number, text in enumerate(lines[1:], start=2):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            cut = (
                number == last
                and not data.endswith((b"\n", b"\r"))
                and (exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"))
            )
            if cut:
                raise TruncatedFileError(
                    path, f"the last entry ends inside its JSON ({exc.msg})", line=number
                ) from None
            raise FormatError(
                path, f"file entry is not valid JSON: {exc.msg}", line=number
            ) from None
        except RecursionError:
            raise FormatError(path, "file entry is nested too deeply", line=number) from None
        if not isinstance(obj, dict):
            raise FormatError(path, "a file entry must be a JSON object", line=number)
        file_path = obj.get("path")
        if not isinstance(file_path, str):
            raise FormatError(path, 'file entry has no "path" string', line=number)
        values = []
        for key in ("timestamp", "batchId"):
            value = obj.get(key)
            if isinstance(value, bool) or not isinstance(value, int):
                raise FormatError(
                    path, f"file entry {key} must be an integer, found {value!r}", line=number
                )
            values.append(value)
        entries.append(FileSourceEntry(file_path, values[0], values[1]))
    return tuple(entries)


def parse_file_source_offset(path: str, text: str) -> int:
    """The logOffset of a file source's offset in ``offsets/<batch>``, read as
    ``FileStreamSourceOffset.apply`` does: a bare number (Spark 2.0), else
    ``{"logOffset":N}``."""
    stripped = text.strip()
    if stripped.lstrip("-").isdigit() and stripped.isascii():
        return int(stripped)
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise FormatError(path, f"file source offset {text[:60]!r} is not JSON") from None
    value = obj.get("logOffset") if isinstance(obj, dict) else None
    if isinstance(value, bool) or not isinstance(value, int):
        raise FormatError(path, f'file source offset {text[:60]!r} has no integer "logOffset"')
    return value


def parse_source_initial_offset(path: str, data: bytes) -> str:
    """``sources/<n>/0`` of a source that records its start offset there (Kafka, rate):
    a zero byte, ``v1``, a newline, then the offset JSON (or, from Spark 2.1.0, the bare JSON).
    Returns the offset JSON text."""
    content = _decode(path, data[1:] if data[:1] == b"\x00" else data)
    if not content:
        raise FormatError(path, "empty initial offset file")
    if content[0] == "v":
        header, sep, body = content.partition("\n")
        if not sep:
            raise FormatError(path, "the version line is not followed by a newline", line=1)
        _split_header(path, header.encode(), 1, "initial offset file")
    else:
        body = content
    try:
        json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        raise FormatError(path, "the initial offset is not valid JSON", line=2) from None
    return body
