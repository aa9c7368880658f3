"""A RocksDB state store version written from scratch: ``<v>[_<uniqueId>].zip`` + new SSTs.

What Spark 4.3's ``RocksDB.commit`` + ``RocksDBFileManager.saveCheckpointToDfs`` leave for a
version with no changelog (docs §5.1-§5.4, checked against the fixtures' zips):

* the data in a real RocksDB (rocksdict, the RocksDB 9.8.4 that Spark 4.3's rocksdbjni
  bundles) with Spark's table options (LZ4, 4 KiB blocks, format_version 5, 10-bit Bloom
  filter), every key/value as given in the default column family (Spark's column families
  are virtual: a 2-byte id prefix inside each key), the WAL off, flushed, then a RocksDB
  ``Checkpoint`` of it, the way ``RocksDB.createSnapshot`` takes one;
* each top-level ``*.sst`` of the checkpoint goes to ``SSTs/<base>-<uuid>.sst``
  (``newDFSFileName``: one random suffix for the files of one upload), ``archive/*.log`` would
  go to ``logs/`` (a flushed DB has none);
* every other file (``CURRENT``, ``MANIFEST-*``, ``OPTIONS-*``, the empty live ``*.log``) and
  ``metadata`` (``v1`` line + ``RocksDBCheckpointMetadata`` JSON, no trailing newline) are
  deflated into the zip, flat names, ``metadata`` last;
* checkpoint format v2 on Spark 4.1+ (``checkpoint.fileChecksum.enabled``): a visible
  ``<zip>.crc`` JSON beside the zip (``ChecksumCheckpointFileManager``); SSTs get none (they
  are copied with ``FileSystem.copyFromLocalFile``).

Write the SSTs first and the zip last: until the zip exists the SSTs are unreferenced.
"""

from __future__ import annotations

import io
import json
import tempfile
import time
import uuid
import zipfile
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckpt_cli.formats import checksums
from ckpt_cli.formats.names import hadoop_crc_name
from ckpt_cli.formats.rocksdb_zip import (
    METADATA_ENTRY,
    RocksDBCheckpointMetadata,
    RocksDBFile,
    parse_zip_metadata,
)
from ckpt_cli.formats.state_encoders import split_column_family, split_list_value

SSTS_DIR = "SSTs"
LOGS_DIR = "logs"
# RocksDBConf defaults (spark.sql.streaming.stateStore.rocksdb.*): compression=lz4,
# blockSizeKB=4, formatVersion=5; the Bloom filter is RocksDB.scala's BloomFilter(10).
_BLOCK_SIZE = 4 << 10
_FORMAT_VERSION = 5
_BLOOM_BITS = 10
# Records per WriteBatch (bounds the Python-side memory of one write).
_BATCH = 10_000
# The memtable's size (RocksDB's default, which Spark keeps, is 64 MiB): what the writer holds
# at most, twice (one being filled while the full one is flushed). A larger version is
# flushed to several SSTs, compacted as RocksDB sees fit; neither changes what the files hold
# or how (the table options above are Spark's).
_WRITE_BUFFER = 4 << 20
# Files rocksdict adds that RocksDB's checkpoint of Spark's DB does not have.
_NOT_SPARKS = frozenset({"rocksdict-config.json"})
MERGE_OPERATOR_VERSION_CONF = "spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion"
# The 4.x metadata fields, in RocksDBCheckpointMetadata's declaration order.
_V4_FIELDS = ("numInternalKeys", "columnFamilyMapping", "columnFamilyTypeMap", "maxColumnFamilyId")


@dataclass(frozen=True)
class RocksDBCheckpointFiles:
    """One version's new files, named relative to the store directory."""

    version: int
    unique_id: str | None
    zip_name: str
    zip_bytes: bytes
    # DFS name (under ``SSTs/``) -> bytes.
    ssts: dict[str, bytes]
    metadata: RocksDBCheckpointMetadata
    # Archived WAL files (under ``logs/``): none after a flush, kept for completeness.
    logs: dict[str, bytes] = field(default_factory=dict)
    # Spark's ``<zip>.crc`` checksum file, when written.
    zip_checksum: bytes | None = None

    def files(self, *, hadoop_crc: bool = False) -> list[tuple[str, bytes]]:
        """``(path relative to the store directory, bytes)`` in the order to write them:
        SSTs and logs, then the zip (the commit point), then its checksum file. With
        ``hadoop_crc`` each file is followed by the hidden ``.<name>.crc`` that Hadoop's
        local file system writes beside it."""
        out = [(f"{SSTS_DIR}/{name}", data) for name, data in sorted(self.ssts.items())]
        out += [(f"{LOGS_DIR}/{name}", data) for name, data in sorted(self.logs.items())]
        out.append((self.zip_name, self.zip_bytes))
        if self.zip_checksum is not None:
            out.append((self.zip_name + ".crc", self.zip_checksum))
        if not hadoop_crc:
            return out
        with_crc: list[tuple[str, bytes]] = []
        for path, data in out:
            with_crc += [(path, data), (hadoop_crc_name(path), checksums.hadoop_crc_bytes(data))]
        return with_crc


def zip_file_name(version: int, unique_id: str | None) -> str:
    """``<version>.zip``, or ``<version>_<uniqueId>.zip`` in checkpoint format v2."""
    return f"{version}_{unique_id}.zip" if unique_id else f"{version}.zip"


def merge_delimiter(conf: Mapping[str, str]) -> bytes:
    """The delimiter Spark's ``StringAppendOperator`` puts between list elements:
    none with ``mergeOperatorVersion`` 2 (4.3's default, pinned in the offsets' conf), ``,``
    with version 1 or before the setting existed (4.0-4.2)."""
    return b"" if conf.get(MERGE_OPERATOR_VERSION_CONF, "1").strip() == "2" else b","


@dataclass(frozen=True)
class VersionOptions:
    """How :func:`write_rocksdb_checkpoint` writes a version (see its docstring): the zip's
    ``unique_id`` (format v2), the ``template`` metadata, the ``checksum_file``, its
    ``now_ms``, and the ``list_families`` whose elements are joined by ``delimiter``
    (``row_checksums``: the elements carry them)."""

    unique_id: str | None = None
    template: RocksDBCheckpointMetadata | None = None
    checksum_file: bool | None = None  # None: when unique_id is given
    now_ms: int | None = None
    list_families: Collection[str] = ()
    delimiter: bytes = b""
    row_checksums: bool = False


def build_rocksdb_checkpoint(
    records: Iterable[tuple[bytes, bytes]],
    version: int,
    options: VersionOptions = VersionOptions(),
) -> RocksDBCheckpointFiles:
    """:func:`write_rocksdb_checkpoint`'s files as bytes, for versions small enough to hold."""
    with tempfile.TemporaryDirectory(prefix="ckpt-rocksdb-files-") as tmp:
        dest = Path(tmp) / "version"
        written = write_rocksdb_checkpoint(records, version, dest, options)

        def under(folder: str) -> dict[str, bytes]:
            prefix = folder + "/"
            return {
                n.removeprefix(prefix): (dest / n).read_bytes()
                for n in written.names
                if n.startswith(prefix)
            }

        checksum = dest / (written.zip_name + ".crc")
        return RocksDBCheckpointFiles(
            version=version,
            unique_id=options.unique_id,
            zip_name=written.zip_name,
            zip_bytes=(dest / written.zip_name).read_bytes(),
            ssts=under(SSTS_DIR),
            metadata=written.metadata,
            logs=under(LOGS_DIR),
            zip_checksum=checksum.read_bytes() if checksum.exists() else None,
        )


@dataclass(frozen=True)
class WrittenVersion:
    """One version's new files, written into a local directory."""

    zip_name: str
    metadata: RocksDBCheckpointMetadata
    # Paths relative to the directory (the store directory's layout), in the order to write
    # them: SSTs and logs, then the zip (the commit point), then its checksum file.
    names: list[str]


def write_rocksdb_checkpoint(
    records: Iterable[tuple[bytes, bytes]],
    version: int,
    dest: Path,
    options: VersionOptions = VersionOptions(),
) -> WrittenVersion:
    """A full RocksDB version holding exactly ``records`` (RocksDB key, value as stored; each
    key once, in any order: RocksDB sorts them, and the key counts assume no repeats), its
    files written under ``dest`` (created; the DB is built beside it, on the same disk).
    Memory stays bounded whatever the size: records stream into the DB, whose write buffer
    is small, and no file is held whole.

    ``template`` is the metadata of the store's newest existing zip: its header version, the
    fields it has (3.x writes only ``sstFiles``/``numKeys``), the virtual column families
    (``columnFamilyMapping``, ``columnFamilyTypeMap``, ``maxColumnFamilyId``) and whether
    keys are counted (``numKeys`` -1) carry over; None means Spark 4.x's metadata of a store
    without column families. Keys are counted as ``RocksDB.put`` counts them: a key of an
    internal column family (``$rowCounter_*``, timers) in ``numInternalKeys``, any other in
    ``numKeys``. ``unique_id`` names the zip of checkpoint format v2; ``checksum_file``
    (default: when ``unique_id`` is given) adds Spark's ``<zip>.crc``.

    List values (``list_families``: the column families of ListState variables and of join
    format 4's ``*-keyWithTsToValues``/``*-tsWithKey``, named in the template's mapping) are
    stored as Spark's merge operator leaves them, elements joined by ``delimiter``
    (``merge_delimiter(conf)``): a value read back through another RocksDB (rocksdict joins
    unmerged operands with ``,``) would otherwise misalign Spark's reader when the
    checkpoint's delimiter is none. ``row_checksums``: the elements carry them.
    """
    template, unique_id = options.template, options.unique_id
    mapping = template.column_family_mapping if template is not None else {}
    ids = frozenset(mapping[name] for name in options.list_families if name in mapping)
    if ids:  # a store without list families: records go in as they are
        records = _joined_lists(records, ids, options.delimiter, options.row_checksums)
    suffix = str(uuid.uuid4())
    dest.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix=".rocksdb-", dir=dest.parent) as tmp:
        checkpoint_dir = Path(tmp) / "checkpoint"
        counts = _write_db(Path(tmp) / "db", checkpoint_dir, records, template)
        ssts, logs, others = _collect(checkpoint_dir, suffix)
        metadata_text = _metadata_text(ssts, logs, counts, template)
        zip_bytes = _zip(others, metadata_text)
        names = [f"{SSTS_DIR}/{f.dfs_file_name}" for f, _ in ssts]
        names += [f"{LOGS_DIR}/{f.dfs_file_name}" for f, _ in logs]
        for name, (_, local) in zip(names, ssts + logs, strict=True):
            (dest / name).parent.mkdir(exist_ok=True)
            local.rename(dest / name)  # the same disk: no copy
    name = zip_file_name(version, unique_id)
    (dest / name).write_bytes(zip_bytes)
    names.append(name)
    checksum_file = options.checksum_file
    if checksum_file is None:
        checksum_file = unique_id is not None
    if checksum_file:
        crc = checksums.spark_checksum_bytes(zip_bytes, options.now_ms)
        (dest / f"{name}.crc").write_bytes(crc)
        names.append(f"{name}.crc")
    return WrittenVersion(name, parse_zip_metadata(METADATA_ENTRY, metadata_text), names)


def _joined_lists(
    records: Iterable[tuple[bytes, bytes]], ids: frozenset[int], delimiter: bytes, checksums: bool
) -> Iterator[tuple[bytes, bytes]]:
    # An element is [int32 n][n bytes], with row checksums [int32 crc][int32 n][int32 m][m].
    header = 12 if checksums else 4
    for key, value in records:
        if split_column_family(key)[0] in ids:
            elements = split_list_value(value, key=key, checksums=checksums)
            value = delimiter.join(
                value[e.offset : e.offset + header + len(e.data)] for e in elements
            )
        yield key, value


def _write_db(
    db_dir: Path,
    checkpoint_dir: Path,
    records: Iterable[tuple[bytes, bytes]],
    template: RocksDBCheckpointMetadata | None,
) -> tuple[int, int]:
    """Write ``records`` into a new DB and checkpoint it; returns (keys, internal keys)."""
    from rocksdict import (
        BlockBasedOptions,
        Checkpoint,
        DBCompressionType,
        Options,
        Rdict,
        WriteBatch,
        WriteOptions,
    )

    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_compression_type(DBCompressionType.lz4())
    table = BlockBasedOptions()
    table.set_block_size(_BLOCK_SIZE)
    table.set_format_version(_FORMAT_VERSION)
    table.set_bloom_filter(_BLOOM_BITS, False)
    options.set_block_based_table_factory(table)
    options.set_write_buffer_size(_WRITE_BUFFER)
    db = Rdict(str(db_dir), options=options)
    try:
        write_options = WriteOptions()
        # Spark's RocksDB writes with the WAL off. A property at run time (the stubs say a
        # method).
        setattr(write_options, "disable_wal", True)  # noqa: B010
        db.set_write_options(write_options)
        internal = _internal_ids(template)
        keys = internal_keys = 0
        batch = WriteBatch(raw_mode=True)
        for key, value in records:
            batch.put(key, value)
            if internal and split_column_family(key)[0] in internal:
                internal_keys += 1
            else:
                keys += 1
            if batch.len() >= _BATCH:
                db.write(batch)
                batch = WriteBatch(raw_mode=True)
        if batch.len():
            db.write(batch)
        db.flush()
        Checkpoint(db).create_checkpoint(str(checkpoint_dir))
    finally:
        db.close()
    return keys, internal_keys


def _internal_ids(template: RocksDBCheckpointMetadata | None) -> frozenset[int]:
    if template is None:
        return frozenset()
    kinds = template.column_family_type_map
    return frozenset(i for n, i in template.column_family_mapping.items() if kinds.get(n) is True)


def _collect(
    checkpoint_dir: Path, suffix: str
) -> tuple[list[tuple[RocksDBFile, Path]], list[tuple[RocksDBFile, Path]], list[Path]]:
    """``listRocksDBFiles``: top-level SSTs and ``archive/*.log`` are immutable (shared
    files with DFS names), everything else goes into the zip."""
    ssts: list[tuple[RocksDBFile, Path]] = []
    logs: list[tuple[RocksDBFile, Path]] = []
    others: list[Path] = []
    for path in sorted(checkpoint_dir.iterdir()):
        if path.is_dir() or path.name in _NOT_SPARKS:
            continue
        if path.suffix == ".sst":
            ssts.append(_immutable(path, suffix))
        else:
            others.append(path)
    archive = checkpoint_dir / "archive"
    if archive.is_dir():
        logs = [_immutable(p, suffix) for p in sorted(archive.glob("*.log"))]
    return ssts, logs, others


def _immutable(path: Path, suffix: str) -> tuple[RocksDBFile, Path]:
    dfs_name = f"{path.stem}-{suffix}{path.suffix}"  # newDFSFileName(local, suffix)
    return RocksDBFile(path.name, dfs_name, path.stat().st_size), path


def _metadata_text(
    ssts: list[tuple[RocksDBFile, Path]],
    logs: list[tuple[RocksDBFile, Path]],
    counts: tuple[int, int],
    template: RocksDBCheckpointMetadata | None,
) -> str:
    """``RocksDBCheckpointMetadata.writeToFile``: ``v<VERSION>\\n`` + Jackson JSON in field
    declaration order, ``logFiles`` left out when empty and ``None`` options left out."""
    keys, internal_keys = counts
    if template is not None and template.num_keys == -1:  # trackTotalNumberOfRows=false
        keys, internal_keys = -1, template.num_internal_keys or 0
    obj: dict[str, Any] = {
        "sstFiles": [_file_json(f, "dfsSstFileName") for f, _ in ssts],
    }
    if logs:
        obj["logFiles"] = [_file_json(f, "dfsLogFileName") for f, _ in logs]
    obj["numKeys"] = keys
    raw = template.raw if template is not None else None
    values: dict[str, Any] = {
        "numInternalKeys": internal_keys,
        "columnFamilyMapping": dict(template.column_family_mapping) if template else {},
        "columnFamilyTypeMap": dict(template.column_family_type_map) if template else {},
        "maxColumnFamilyId": (template.max_column_family_id or 0) if template else 0,
    }
    for name in _V4_FIELDS:
        if raw is None or name in raw:
            obj[name] = values[name]
    header = template.version if template is not None else 1
    return f"v{header}\n" + json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _file_json(f: RocksDBFile, dfs_key: str) -> dict[str, Any]:
    return {"localFileName": f.local_file_name, dfs_key: f.dfs_file_name, "sizeBytes": f.size_bytes}


def _zip(others: list[Path], metadata_text: str) -> bytes:
    """``zipToDfsFile``: a ``ZipOutputStream`` of flat DEFLATE entries (java.util.zip's
    default level, like zlib's)."""
    buffer = io.BytesIO()
    stamp = time.localtime()[:6]
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        entries = [(p.name, p.read_bytes()) for p in others]
        entries.append((METADATA_ENTRY, metadata_text.encode("utf-8")))
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()
