"""``ckpt inspect``: what one checkpoint file is, its header facts and its first rows.

The report is a :class:`FileReport`. Problems found while reading (a truncated stream, a bad
checksum, a zip naming a missing SST) go into ``problems`` with the rest of the facts still
reported, so a damaged file can be looked at; a file that is not there is an error.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ckpt_cli.core.layout import StoreLocation
from ckpt_cli.core.model import CHECKSUM_KINDS, Checkpoint, CheckpointFile, FileKind
from ckpt_cli.core.read import store_schema
from ckpt_cli.core.rebuild import codec_of
from ckpt_cli.errors import CkptError, FormatError, LimitExceededError, UnsupportedVersionError
from ckpt_cli.formats import checksums, compression, logs, records, rocksdb, rocksdb_zip
from ckpt_cli.formats.spark_types import StructType
from ckpt_cli.formats.state_schema import StateSchema, parse_state_schema
from ckpt_cli.results import Result, fields_json
from ckpt_cli.state.decoders import RowDecoder, json_value
from ckpt_cli.units import iso_ms, watermark_iso

DEFAULT_LIMIT = 20

_ROOT_MARKERS = ("/state/", "/offsets/", "/commits/", "/sources/")


def split_file_location(location: str) -> tuple[str, str]:
    """``(checkpoint root, relative path)`` of a file given by its full path or URL.

    The root is the part before the last ``/state/``, ``/offsets/``, ``/commits/`` or
    ``/sources/`` component, or the directory of a top-level ``metadata`` file.
    """
    loc = location.rstrip("/")
    best = -1
    for marker in _ROOT_MARKERS:
        best = max(best, loc.rfind(marker))
    if best >= 0:
        return loc[:best] or "/", loc[best + 1 :]
    head, sep, name = loc.rpartition("/")
    if sep and name == "metadata":
        return head or "/", name
    raise CkptError(
        f"{location}: cannot tell which checkpoint this file belongs to",
        hint="give the checkpoint root, and the file relative to it",
    )


def find_file(ckpt: Checkpoint, rel: str) -> CheckpointFile:
    rel = rel.strip("/")
    for f in ckpt.files:
        if f.path == rel:
            return f
    if any(f.path.startswith(rel + "/") for f in ckpt.files):
        raise CkptError(f"{rel}: is a directory; inspect one file in it (ckpt versions lists them)")
    parts = rel.split("/")
    for i in range(1, len(parts) + 1):
        link = "/".join(parts[:i])
        if link in ckpt.listing.symlinks:
            # The listing does not enter linked directories, and a dangling link lists nothing.
            target = ckpt.listing.symlinks[link]
            raise CkptError(
                f"{rel}: a symbolic link to {target}, which does not exist"
                if link == rel
                else f"{rel}: behind the symbolic link {link} (to {target}), which ckpt does "
                "not follow",
                hint="inspect the file where the link points",
            )
    raise CkptError(f"{rel}: no such file in the checkpoint {ckpt.storage.url}")


@dataclass
class FileReport(Result):
    """``ckpt inspect``: what one file is, with its problems. What the file's kind adds (its
    header, records, lineage, zip contents, first rows...) is in ``details``, JSON-ready."""

    checkpoint: str
    path: str
    kind: FileKind
    size: int
    modified: float | None
    store: StoreLocation | None
    version: int | None
    batch: int | None
    unique_id: str | None
    problems: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def body_json(self) -> dict[str, Any]:
        store = self.store
        return {
            "checkpoint": self.checkpoint,
            "path": self.path,
            "kind": self.kind.value,
            "size": self.size,
            "modified": self.modified,
            "store": (
                {"operator": store.operator, "partition": store.partition, "store": store.store}
                if store
                else None
            ),
            "version": self.version,
            "batch": self.batch,
            "unique_id": self.unique_id,
            "problems": self.problems,
            **self.details,
        }


def inspect_file(ckpt: Checkpoint, rel: str, *, limit: int = DEFAULT_LIMIT) -> FileReport:
    f = find_file(ckpt, rel)
    report = FileReport(
        ckpt.storage.url,
        f.path,
        f.kind,
        f.entry.size,
        f.entry.mtime,
        f.store,
        f.version,
        f.batch,
        f.unique_id,
    )
    problems = report.problems
    try:
        handler = _HANDLERS.get(f.kind)
        if handler is not None:
            handler(ckpt, f, report, limit)
        if f.kind in (FileKind.TEMP, *CHECKSUM_KINDS):
            report.details["target"] = f.target
    except (LimitExceededError, UnsupportedVersionError):
        # Not damage to report: ckpt would not read on, or cannot read this version (one line,
        # exit 2, with the limit's or the version's hint).
        raise
    except FormatError as exc:
        problems.append(str(exc))
    _check_sidecars(ckpt, f, report)
    return report


# -- per kind --------------------------------------------------------------------------------


def _metadata(ckpt: Checkpoint, f: CheckpointFile, report: FileReport, limit: int) -> None:
    meta = logs.parse_stream_metadata(f.path, ckpt.storage.read_bytes(f.path))
    report.details["header"] = {"query_id": meta.query_id}


def _offsets(ckpt: Checkpoint, f: CheckpointFile, report: FileReport, limit: int) -> None:
    assert f.batch is not None
    seq = ckpt.offsets(f.batch)
    report.details["header"] = fields_json(
        seq,
        "log_version batch_watermark_ms batch_timestamp_ms batch_watermark batch_timestamp conf",
        # The same times for people (ISO-8601 UTC).
        batch_watermark=watermark_iso(seq.batch_watermark_ms),
        batch_timestamp=iso_ms(seq.batch_timestamp_ms),
    )
    ids = seq.source_ids or ()
    report.details["sources"] = [
        {"index": i, "offset": off, **({"id": ids[i]} if i < len(ids) else {})}
        for i, off in enumerate(seq.source_offsets)
    ]


def _commit(ckpt: Checkpoint, f: CheckpointFile, report: FileReport, limit: int) -> None:
    assert f.batch is not None
    commit = ckpt.commit(f.batch)
    report.details["header"] = {
        "log_version": commit.log_version,
        "next_batch_watermark_ms": commit.next_batch_watermark_ms,
        "next_batch_watermark": watermark_iso(commit.next_batch_watermark_ms),
        "state_unique_ids": (
            {str(k): [list(p) for p in v] for k, v in commit.state_unique_ids.items()}
            if commit.state_unique_ids
            else None
        ),
    }


def _operator_metadata(ckpt: Checkpoint, f: CheckpointFile, report: FileReport, limit: int) -> None:
    meta = logs.parse_operator_metadata(f.path, ckpt.storage.read_bytes(f.path))
    report.details["header"] = {
        "version": meta.version,
        "operator_id": meta.operator_id,
        "operator_name": meta.operator_name,
        "stores": meta.stores,
    }


def _schema_json(schema: StructType) -> list[dict[str, Any]]:
    return [
        {"name": fld.name, "type": fld.data_type.simple_string(), "nullable": fld.nullable}
        for fld in schema.fields
    ]


def _state_schema(ckpt: Checkpoint, f: CheckpointFile, report: FileReport, limit: int) -> None:
    schema = parse_state_schema(f.path, ckpt.storage.read_bytes(f.path))
    report.details["header"] = _describe_schema(schema)


def _describe_schema(schema: StateSchema) -> dict[str, Any]:
    return {
        "schema_version": schema.version,
        "column_families": [
            {
                "name": cf.name,
                "key": _schema_json(cf.key),
                "value": _schema_json(cf.value),
                "key_encoder": cf.key_encoder.kind,
            }
            for cf in schema.column_families
        ],
        "trailing_bytes": schema.trailing_bytes,
    }


def _decoder_for(ckpt: Checkpoint, f: CheckpointFile, report: FileReport) -> RowDecoder:
    assert f.store is not None
    provider = ckpt.operators[f.store.operator].stores[f.store.store].provider
    schema: StateSchema | None = None
    try:
        schema = store_schema(ckpt, f.store.operator, f.store.store)
    except FormatError as exc:
        report.problems.append(f"rows shown as hex: {exc}")
    report.details["schema"] = (
        {"key": _schema_json(schema.key), "value": _schema_json(schema.value)} if schema else None
    )
    return RowDecoder(schema, provider, path=f.path)


def _decode_row(decoder: RowDecoder, key: bytes, value: bytes | None) -> dict[str, Any]:
    try:
        k, v = decoder(key, value)
        return {"key": json_value(k), "value": json_value(v)}
    except FormatError as exc:
        return {
            "key": key.hex(),
            "value": value.hex() if value is not None else None,
            "error": exc.problem,
        }


def _state_records(ckpt: Checkpoint, f: CheckpointFile, report: FileReport, limit: int) -> None:
    decoder = _decoder_for(ckpt, f, report)
    stats = records.RecordStats()
    rows: list[dict[str, Any]] = []
    report.details["rows"] = rows
    with ckpt.storage.open_stream(f.path) as fh:
        head = fh.read(8)
        report.details["codec"] = compression.detect_codec(head)
        report.details["configured_codec"] = codec_of(ckpt)
        stream = _Prefixed(head, fh)
        chunks = compression.decompressed_chunks(f.path, stream, codec=codec_of(ckpt))
        it: Iterator[tuple[str, bytes, bytes | None]]
        if f.kind is FileKind.CHANGELOG:
            changelog = records.open_changelog(f.path, chunks)
            report.details["changelog_format_version"] = changelog.format_version
            report.details["lineage"] = (
                [{"version": e.version, "unique_id": e.unique_id} for e in changelog.lineage]
                if changelog.lineage is not None
                else None
            )
            it = changelog.records()
            stats = changelog.stats
        else:
            it = (
                (records.PUT if v is not None else records.DELETE, k, v)
                for k, v in records.iter_kv_records(
                    f.path, chunks, snapshot=f.kind is FileKind.SNAPSHOT, stats=stats
                )
            )
        report.details["records"] = stats_json = {}
        try:
            for kind, key, value in it:
                if len(rows) < limit:
                    rows.append({"type": kind, **_decode_row(decoder, key, value)})
        finally:
            stats_json.update(
                {
                    "total": stats.records,
                    "puts": stats.puts,
                    "deletes": stats.deletes,
                    "merges": stats.merges,
                    "decompressed_bytes": stats.data_bytes,
                    "trailing_bytes": stats.trailing_bytes,
                    "complete": stats.complete,
                }
            )
    if stats.trailing_bytes:
        report.problems.append(
            f"{f.path}: {stats.trailing_bytes} bytes after the end-of-file marker"
        )


class _Prefixed:
    def __init__(self, head: bytes, rest: compression.Readable) -> None:
        self._buf = io.BytesIO(head)
        self._rest = rest

    def read(self, n: int = -1, /) -> bytes:
        data = self._buf.read(n)
        if n < 0:
            return data + self._rest.read()
        if len(data) < n:
            data += self._rest.read(n - len(data))
        return data


def _zip(ckpt: Checkpoint, f: CheckpointFile, report: FileReport, limit: int) -> None:
    assert f.store is not None
    data = ckpt.storage.read_bytes(f.path)
    contents = rocksdb_zip.read_zip(f.path, data)
    meta = contents.metadata
    store_dir = f.path.rsplit("/", 1)[0]
    shared = []
    for subdir, files in (("SSTs", meta.sst_files), ("logs", meta.log_files)):
        for sf in files:
            path = f"{store_dir}/{subdir}/{sf.dfs_file_name}"
            entry = ckpt.listing.get(path)
            status = "ok"
            if entry is None:
                status = "missing"
                report.problems.append(f"{f.path}: names {path}, which is not in the checkpoint")
            elif entry.size != sf.size_bytes:
                status = "size-mismatch"
                report.problems.append(
                    f"{path}: {entry.size} bytes, {f.path} records {sf.size_bytes}"
                )
            shared.append(
                {
                    "local_file_name": sf.local_file_name,
                    "path": path,
                    "size_bytes": sf.size_bytes,
                    "status": status,
                }
            )
    report.details["zip_entries"] = [
        {"name": e.name, "size": e.size, "compressed_size": e.compressed_size}
        for e in contents.entries
    ]
    report.details["metadata"] = {
        "num_keys": meta.num_keys,
        "num_internal_keys": meta.num_internal_keys,
        "column_family_mapping": meta.column_family_mapping,
        "max_column_family_id": meta.max_column_family_id,
        "shared_files": shared,
    }
    decoder = _decoder_for(ckpt, f, report)
    rows: list[dict[str, Any]] = []
    report.details["rows"] = rows
    if report.problems:
        return
    part_prefix = store_dir + "/"
    count = 0
    with tempfile.TemporaryDirectory(prefix="ckpt-inspect-") as tmp:
        rocksdb_zip.rebuild_db_dir(
            data, lambda rel: ckpt.storage.read_bytes(part_prefix + rel), tmp, path=f.path
        )
        if meta.uses_column_families:
            report.problems.append(f"{f.path}: rows of column-family stores are shown raw (hex)")
            decoder = RowDecoder(None, "hdfs", path=f.path)
        for key, value in rocksdb.iter_db(tmp, path=f.path):
            count += 1
            if len(rows) < limit:
                rows.append(_decode_row(decoder, key, value))
    report.details["records"] = {"total": count}
    keys_known = meta.num_keys is not None and meta.num_keys >= 0
    if keys_known and not meta.uses_column_families and meta.num_keys != count:
        report.problems.append(
            f"{f.path}: metadata says numKeys={meta.num_keys}, the SSTs hold {count} keys"
        )


_HANDLERS = {
    FileKind.METADATA: _metadata,
    FileKind.OFFSETS: _offsets,
    FileKind.COMMIT: _commit,
    FileKind.OPERATOR_METADATA: _operator_metadata,
    FileKind.STATE_SCHEMA: _state_schema,
    FileKind.DELTA: _state_records,
    FileKind.SNAPSHOT: _state_records,
    FileKind.CHANGELOG: _state_records,
    FileKind.ZIP: _zip,
}


def _check_sidecars(ckpt: Checkpoint, f: CheckpointFile, report: FileReport) -> None:
    """Verify the checksum files that cover ``f`` (Hadoop ``.crc``, Spark ``<name>.crc``)."""
    checks: list[dict[str, Any]] = []
    covering = ckpt.sidecars_of(f.path)
    if not covering:
        return
    data = ckpt.storage.read_bytes(f.path)
    for c in covering:
        try:
            raw = ckpt.storage.read_bytes(c.path)
            if c.kind is FileKind.HADOOP_CRC:
                problem = checksums.verify_hadoop_crc(checksums.parse_hadoop_crc(c.path, raw), data)
            else:
                problem = checksums.verify_spark_checksum(
                    checksums.parse_spark_checksum(c.path, raw), data
                )
        except FormatError as exc:
            problem = exc.problem
        checks.append({"path": c.path, "kind": c.kind.value, "ok": problem is None})
        if problem:
            report.problems.append(f"{c.path}: {problem}")
    report.details["checksums"] = checks
