"""RocksDB state store versions: the ``<v>.zip`` and its ``metadata``, rebuilding a local DB
directory from zip + ``SSTs/``, iterating it, and Spark's key/value encoding.

docs/spark-checkpoint-format.md §5.1-§5.3, §5.8 and Appendix C. Storage access stays with the
caller: ``rebuild_db_dir`` fetches shared files through a callback.

What was checked against real Spark 4.3.0 files (tests/formats/data_rows): the zip/metadata
layout, NoPrefix keys and values (``0x00`` + UnsafeRow), PrefixKeyScan keys (session window
and transformWithState MapState), the 2-byte virtual column family prefix of
transformWithState, and ListState values. RangeKeyScan keys, Avro encoding and row checksums
are not decoded here: ``formats/state_encoders.py`` decodes every Spark 4.x key encoder, Avro
and row checksums, per column family of the state schema file v3.
"""

from __future__ import annotations

import io
import json
import os
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, cast

from ckpt_cli.errors import (
    FormatError,
    LimitExceededError,
    UnsupportedVersionError,
    unsupported_hint,
)
from ckpt_cli.formats import limits as lim
from ckpt_cli.formats.limits import Limits
from ckpt_cli.formats.state_encoders import strip_version

METADATA_ENTRY = "metadata"
# The metadata's first line. Spark 3.2-3.5 and 4.1+ write "v1"; Spark 4.0 writes
# "v" + spark.sql.streaming.stateStore.checkpointFormatVersion ("v2" in format-v2 zips; the
# JSON is the same). RocksDBCheckpointMetadata.VERSION in each version's spark-sql jar.
ZIP_METADATA_VERSIONS = (1, 2)
VIRTUAL_CF_PREFIX_BYTES = 2
# A RocksDB version's "other files" are a few KB; this caps what a corrupt or hostile zip can
# make us inflate onto disk (formats/limits.py bounds it further by ratio).
MAX_ZIP_ENTRY_BYTES = 1 << 30


@dataclass(frozen=True)
class RocksDBFile:
    """An immutable file of a version: ``local_file_name`` in the DB dir, ``dfs_file_name``
    under ``SSTs/`` (or ``logs/``) of the store directory."""

    local_file_name: str
    dfs_file_name: str
    size_bytes: int


@dataclass(frozen=True)
class RocksDBCheckpointMetadata:
    """The ``metadata`` entry of a ``<v>.zip`` (``v1`` or ``v2`` header + JSON)."""

    sst_files: tuple[RocksDBFile, ...]
    log_files: tuple[RocksDBFile, ...]
    # -1 when key counting is off (trackTotalNumberOfRows=false); None when absent.
    num_keys: int | None
    # Spark 4.x fields; None / empty in 3.5 files.
    num_internal_keys: int | None = None
    # Virtual column family name -> id (the 2-byte key prefix).
    column_family_mapping: dict[str, int] = field(default_factory=dict)
    # Column family name -> "is internal" (e.g. ``$rowCounter_<var>``: true).
    column_family_type_map: dict[str, Any] = field(default_factory=dict)
    max_column_family_id: int | None = None
    version: int = 1
    # The whole JSON object, including fields ckpt does not know.
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def uses_column_families(self) -> bool:
        return bool(self.column_family_mapping)


def _int(path: str, obj: dict[str, Any], key: str, where: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise FormatError(path, f"{where}{key} must be an integer, found {value!r}", line=2)
    return value


def _files(path: str, obj: dict[str, Any], key: str, dfs_key: str) -> tuple[RocksDBFile, ...]:
    items = obj.get(key)
    if items is None:  # 3.5 omits logFiles when empty
        return ()
    if not isinstance(items, list):
        raise FormatError(path, f"{key} must be a JSON list", line=2)
    out: list[RocksDBFile] = []
    for index, item in enumerate(items):
        where = f"{key}[{index}]."
        if not isinstance(item, dict):
            raise FormatError(path, f"{key}[{index}] must be a JSON object", line=2)
        local, dfs = item.get("localFileName"), item.get(dfs_key)
        if not isinstance(local, str) or not isinstance(dfs, str):
            raise FormatError(path, f"{where}localFileName/{dfs_key} must be strings", line=2)
        size = _int(path, item, "sizeBytes", where)
        if size is None or size < 0:
            raise FormatError(path, f"{where}sizeBytes must be a non-negative integer", line=2)
        out.append(RocksDBFile(local, dfs, size))
    return tuple(out)


def parse_zip_metadata(
    path: str, data: str | bytes, *, limits: Limits | None = None
) -> RocksDBCheckpointMetadata:
    """The ``metadata`` entry of a RocksDB ``<v>.zip``."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(
                path, f"metadata is not UTF-8 ({exc.reason})", offset=exc.start
            ) from None
    else:
        text = data
    header, sep, body = text.partition("\n")
    header = header.strip()
    if not (len(header) >= 2 and header[0] == "v" and header[1:].isdigit()):
        shown = header if len(header) <= 40 else header[:40] + "..."
        raise FormatError(path, f"expected the metadata header 'v1', found {shown!r}", line=1)
    version = int(header[1:])
    if version not in ZIP_METADATA_VERSIONS:
        raise UnsupportedVersionError(
            path,
            f"RocksDB checkpoint metadata version {header} is unsupported "
            f"(ckpt reads v1-v{max(ZIP_METADATA_VERSIONS)})",
            line=1,
            hint=unsupported_hint(),
        )
    if not sep or not body.strip():
        raise FormatError(path, f"metadata has no JSON after the '{header}' header", line=2)
    try:
        obj = json.loads(body)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise FormatError(path, f"metadata is not valid JSON: {exc}", line=2) from None
    if not isinstance(obj, dict):
        raise FormatError(path, "metadata must be a JSON object", line=2)
    mapping = obj.get("columnFamilyMapping") or {}
    if not isinstance(mapping, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in mapping.values()
    ):
        raise FormatError(path, "columnFamilyMapping must map names to integer ids", line=2)
    type_map = obj.get("columnFamilyTypeMap") or {}
    if not isinstance(type_map, dict):
        raise FormatError(path, "columnFamilyTypeMap must be a JSON object", line=2)
    limits = limits or Limits.current()
    listed = sum(len(v) for v in (obj.get("sstFiles"), obj.get("logFiles")) if isinstance(v, list))
    limits.check_count(
        path, listed, limits.max_shared_files, "SST and log files listed", lim.SST_FILES_ENV
    )
    return RocksDBCheckpointMetadata(
        sst_files=_files(path, obj, "sstFiles", "dfsSstFileName"),
        log_files=_files(path, obj, "logFiles", "dfsLogFileName"),
        num_keys=_int(path, obj, "numKeys", ""),
        num_internal_keys=_int(path, obj, "numInternalKeys", ""),
        column_family_mapping=dict(mapping),
        column_family_type_map=dict(type_map),
        max_column_family_id=_int(path, obj, "maxColumnFamilyId", ""),
        version=version,
        raw=obj,
    )


# -- the zip ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZipEntry:
    name: str
    size: int
    compressed_size: int


@dataclass(frozen=True)
class ZipContents:
    entries: tuple[ZipEntry, ...]
    metadata: RocksDBCheckpointMetadata


# RuntimeError: an entry flagged as encrypted (Spark never encrypts its zips).
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    NotImplementedError,
    RuntimeError,
)
_EOCD = struct.Struct("<4s4H2LH")
_EOCD64_LOCATOR = struct.Struct("<4sLQL")
_EOCD64 = struct.Struct("<4sQ2H2L4Q")
_ENTRY_CHUNK = 1 << 20


def _zip_directory(fh: BinaryIO) -> tuple[int, int, int]:
    """``(entries, central directory bytes, zip bytes)`` from the end-of-central-directory
    record, read before ``zipfile`` parses (and holds) the whole directory; -1 when there is
    no such record (``zipfile`` then reports the zip as unreadable)."""
    size = fh.seek(0, os.SEEK_END)
    # Like zipfile: the record without a comment first (with the zip64 locator before it),
    # then the last 64 KiB where a comment could hide it.
    for span in (_EOCD.size + _EOCD64_LOCATOR.size, _EOCD.size + 0xFFFF):
        fh.seek(max(0, size - span))
        tail = fh.read()
        at = tail.rfind(b"PK\x05\x06")
        if at >= 0 and len(tail) - at >= _EOCD.size:
            break
    else:
        return -1, -1, size
    _, _, _, _, entries, cd_size, _, _ = _EOCD.unpack_from(tail, at)
    if entries == 0xFFFF or cd_size == 0xFFFFFFFF:
        loc_at = at - _EOCD64_LOCATOR.size
        if loc_at >= 0 and tail[loc_at : loc_at + 4] == b"PK\x06\x07":
            _, _, eocd64_at, _ = _EOCD64_LOCATOR.unpack_from(tail, loc_at)
            fh.seek(eocd64_at)
            head = fh.read(_EOCD64.size)
            if len(head) == _EOCD64.size and head[:4] == b"PK\x06\x06":
                fields = _EOCD64.unpack(head)
                entries, cd_size = fields[7], fields[8]
    return entries, cd_size, size


def _open_zip(path: str, data: bytes | BinaryIO, limits: Limits) -> zipfile.ZipFile:
    fh = io.BytesIO(data) if isinstance(data, bytes) else data
    try:
        entries, cd_size, _ = _zip_directory(fh)
        fh.seek(0)
    except _ZIP_ERRORS as exc:
        raise FormatError(path, f"not a readable zip file: {exc}") from None
    limits.check_count(path, entries, limits.max_zip_entries, "zip entries", lim.ZIP_ENTRIES_ENV)
    # zipfile reads the whole central directory into memory and makes an object per entry.
    limits.check_count(
        path,
        cd_size,
        limits.max_zip_entries * lim.ZIP_DIRECTORY_BYTES_PER_ENTRY,
        "zip central directory bytes",
        lim.ZIP_ENTRIES_ENV,
    )
    try:
        archive = zipfile.ZipFile(fh)
    except _ZIP_ERRORS as exc:
        raise FormatError(path, f"not a readable zip file: {exc}") from None
    limits.check_count(
        path, len(archive.filelist), limits.max_zip_entries, "zip entries", lim.ZIP_ENTRIES_ENV
    )
    return archive


def _check_declared(path: str, info: zipfile.ZipInfo, limits: Limits) -> None:
    what = f"zip entry {info.filename!r}"
    cap, env = _entry_cap(info, limits)
    if info.file_size > cap:
        raise LimitExceededError(
            path,
            f"{what} is too large ({info.file_size} bytes; the limit is {cap}, from {env})",
            hint=f"if the file is genuine, raise {env}",
        )
    limits.check_inflation(path, info.compress_size, info.file_size, what, declared=True)


def _entry_cap(info: zipfile.ZipInfo, limits: Limits) -> tuple[int, str]:
    """The most an entry may inflate to, and the setting that raises it."""
    if info.filename == METADATA_ENTRY:
        # Parsed in memory; its size follows the number of SST files it lists.
        return limits.max_metadata_bytes, lim.SST_FILES_ENV
    return min(MAX_ZIP_ENTRY_BYTES, limits.max_decompressed_bytes), lim.DECOMPRESSED_ENV


def _entry_chunks(
    path: str, archive: zipfile.ZipFile, info: zipfile.ZipInfo, limits: Limits
) -> Iterator[bytes]:
    """An entry's inflated bytes in pieces, held to ``cap`` and to the inflation limits
    against its compressed size; both the sizes the zip declares and the bytes actually
    inflated are checked (the declared sizes can lie)."""
    what = f"zip entry {info.filename!r}"
    _check_declared(path, info, limits)
    cap, env = _entry_cap(info, limits)
    total = 0
    try:
        # zipfile stops at the declared size and checks the CRC-32 at the end.
        with archive.open(info) as fh:
            while chunk := fh.read(_ENTRY_CHUNK):
                total += len(chunk)
                if total > cap:
                    raise LimitExceededError(
                        path,
                        f"{what} inflates past {cap} bytes (the limit from {env})",
                        hint=f"if the file is genuine, raise {env}",
                    )
                limits.check_inflation(path, info.compress_size, total, what)
                yield chunk
    except _ZIP_ERRORS as exc:
        raise FormatError(path, f"{what} is corrupt: {exc}") from None


def _read_entry(
    path: str, archive: zipfile.ZipFile, info: zipfile.ZipInfo, limits: Limits
) -> bytes:
    return b"".join(_entry_chunks(path, archive, info, limits))


def read_zip(path: str, data: bytes | BinaryIO, *, limits: Limits | None = None) -> ZipContents:
    """List a ``<v>.zip``'s entries and parse its ``metadata`` (CRC-checked).

    ``data`` is the zip's bytes or a seekable binary file: only the central directory and the
    ``metadata`` entry are read from a file. Entry counts and sizes are held to ``limits``.
    """
    limits = limits or Limits.current()
    with _open_zip(path, data, limits) as archive:
        infos = archive.infolist()
        # The central directory's sizes alone tell a bomb: no entry needs inflating for it.
        for info in infos:
            _check_declared(path, info, limits)
        entries = tuple(ZipEntry(i.filename, i.file_size, i.compress_size) for i in infos)
        meta_info = next((i for i in infos if i.filename == METADATA_ENTRY), None)
        if meta_info is None:
            raise FormatError(path, "zip has no 'metadata' entry")
        text = _read_entry(path, archive, meta_info, limits)
    return ZipContents(entries, parse_zip_metadata(f"{path}!metadata", text, limits=limits))


def _safe_name(path: str, name: str) -> str:
    # Spark's zips are flat; anything else could write outside the destination.
    if not name or "/" in name or "\\" in name or name in (".", "..") or "\x00" in name:
        raise FormatError(path, f"unexpected zip entry name {name!r} (Spark writes flat names)")
    return name


def rebuild_db_dir(
    zip_bytes: bytes | BinaryIO,
    fetch_shared: Callable[[str], bytes],
    dest_dir: str | os.PathLike[str],
    *,
    path: str = "<zip>",
    copy_shared: Callable[[str, Path], int] | None = None,
    limits: Limits | None = None,
) -> RocksDBCheckpointMetadata:
    """Rebuild the local RocksDB directory of one version (Spark's ``loadCheckpointFromDfs``).

    Unzips into ``dest_dir`` (created if missing; should be empty), then writes each SST
    ``fetch_shared("SSTs/<dfsName>")`` to ``<localFileName>`` and each log
    ``fetch_shared("logs/<dfsName>")`` to ``archive/<localFileName>``, checking each size
    against ``sizeBytes`` like Spark does, and removes ``metadata``. ``fetch_shared`` takes a
    path relative to the store directory; ``copy_shared(rel, dest)``, when given, writes the
    file to ``dest`` itself (streaming large SSTs) and returns its size. Returns the parsed
    metadata. Entries are streamed to disk, held to ``limits`` like ``read_zip``.
    """
    limits = limits or Limits.current()
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    metadata: RocksDBCheckpointMetadata | None = None
    # Each entry is held to the ratio against its own compressed size, and all of them
    # together against the zip's size (many entries at the floor would fill the disk).
    zip_size = len(zip_bytes) if isinstance(zip_bytes, bytes) else zip_bytes.seek(0, os.SEEK_END)
    unpacked = 0
    with _open_zip(path, zip_bytes, limits) as archive:
        for info in archive.infolist():
            name = _safe_name(path, info.filename)
            if name == METADATA_ENTRY:
                # The same cap as read_zip: what inspect and validate refuse, replay refuses.
                content = _read_entry(path, archive, info, limits)
                metadata = parse_zip_metadata(f"{path}!metadata", content, limits=limits)
                continue
            try:
                with open(dest / name, "wb") as out:
                    for chunk in _entry_chunks(path, archive, info, limits):
                        unpacked += len(chunk)
                        limits.check_inflation(path, zip_size, unpacked, "the zip's entries")
                        out.write(chunk)
            except OSError as exc:
                raise FormatError(
                    path, f"cannot unpack zip entry {name!r}: {exc.strerror or exc}"
                ) from None
    if metadata is None:
        raise FormatError(path, "zip has no 'metadata' entry")
    for subdir, files, target in (
        ("SSTs", metadata.sst_files, dest),
        ("logs", metadata.log_files, dest / "archive"),
    ):
        for f in files:
            local = _safe_name(path, f.local_file_name)
            remote = f"{subdir}/{_safe_name(path, f.dfs_file_name)}"
            target.mkdir(parents=True, exist_ok=True)
            if copy_shared is not None:
                size = copy_shared(remote, target / local)
            else:
                content = fetch_shared(remote)
                size = len(content)
                (target / local).write_bytes(content)
            if size != f.size_bytes:
                raise FormatError(
                    remote,
                    f"size {size} bytes differs from the {f.size_bytes} bytes recorded "
                    f"in {path} (Spark refuses to load this version)",
                )
    return metadata


def _dir_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def iter_db(
    dest_dir: str | os.PathLike[str], *, path: str | None = None, limits: Limits | None = None
) -> Iterator[tuple[bytes, bytes]]:
    """All ``(key, value)`` pairs of a rebuilt DB directory in RocksDB (bytewise) key order
    (``iter_db_chunks`` a pair at a time)."""
    for chunk in iter_db_chunks(dest_dir, path=path, limits=limits):
        yield from chunk


# Pairs per chunk: per-chunk costs vanish, memory stays small.
DB_CHUNK_PAIRS = 16384


def iter_db_chunks(
    dest_dir: str | os.PathLike[str],
    *,
    path: str | None = None,
    limits: Limits | None = None,
    size: int = DB_CHUNK_PAIRS,
) -> Iterator[list[tuple[bytes, bytes]]]:
    """All ``(key, value)`` pairs of a rebuilt DB directory in RocksDB (bytewise) key order,
    in lists of up to ``size`` (``iter_db_flat``'s chunks as pairs)."""
    for flat, _ in iter_db_flat(dest_dir, path=path, limits=limits, size=size):
        it = iter(flat)
        yield list(zip(it, it, strict=True))


def iter_db_flat(
    dest_dir: str | os.PathLike[str],
    *,
    path: str | None = None,
    limits: Limits | None = None,
    size: int = DB_CHUNK_PAIRS,
) -> Iterator[tuple[list[bytes], Any]]:
    """All pairs of a rebuilt DB directory in RocksDB (bytewise) key order, up to ``size``
    at a time as one flat list ``[key, value, key, value, ...]`` and the length of each
    (a numpy int64 array): the sizes the limits need are those a packed batch needs.

    Opens read-only in rocksdict raw mode with block checksums verified; a DB RocksDB cannot
    open, or an iteration that stops on corruption, raises FormatError. rocksdict's
    ``items()`` (a pair per step in Rust) ends quietly where a block fails its checksum, so
    at its end an iterator is placed past the last pair it gave: if that one is valid, or
    its status is an error, the data did not end there. SSTs are compressed too: the bytes of
    keys and values are held to ``limits`` against the directory's size, and a
    ``LimitExceededError`` names ``path`` (the zip) when given.
    """
    import itertools

    import numpy as np
    from rocksdict import AccessType, Options, Rdict, ReadOptions

    where = str(dest_dir)
    limits = limits or Limits.current()
    on_disk = _dir_bytes(Path(dest_dir))
    allowed = limits.allowed(on_disk)
    try:
        db = Rdict(where, options=Options(raw_mode=True), access_type=AccessType.read_only())
    except Exception as exc:  # rocksdict raises a plain Exception for RocksDB errors
        raise FormatError(where, f"RocksDB cannot open the rebuilt directory: {exc}") from None
    try:
        read_options = ReadOptions()
        read_options.set_verify_checksums(True)
        # Each block is read once, in order (the stubs miss fill_cache's argument).
        read_options.fill_cache(False)  # type: ignore[call-arg]
        read_options.set_readahead_size(2 << 20)
        total = 0
        last: bytes | None = None
        try:
            # raw mode yields bytes; the stubs type the pairs loosely.
            pairs = cast(Iterator[tuple[bytes, bytes]], db.items(read_opt=read_options))
            flatten = itertools.chain.from_iterable
            while chunk := list(flatten(itertools.islice(pairs, size))):
                sizes = np.fromiter(map(len, chunk), np.int64, len(chunk))
                total += int(sizes.sum())
                if total > allowed:
                    limits.check_inflation(path or where, on_disk, total, "the RocksDB data")
                last = chunk[-2]
                yield chunk, sizes
            it = db.iter(read_options)
            if last is None:
                it.seek_to_first()
            else:
                it.seek(last)
                it.next()
            ended = not it.valid()
            it.status()
            del it
        except LimitExceededError:
            raise
        except Exception as exc:
            raise FormatError(where, f"RocksDB stopped reading the SST data: {exc}") from None
        if not ended:
            raise FormatError(where, "RocksDB stopped reading the SST data before its end")
    finally:
        db.close()


# -- Spark's key/value encoding --------------------------------------------------------------


@dataclass(frozen=True)
class EncodedKey:
    """A RocksDB key with Spark's framing removed.

    ``row`` is the key UnsafeRow; for a prefix-scan key it holds the first
    ``prefix_key_cols`` columns and ``remaining_row`` the rest. ``cf_id`` is the virtual
    column family id (None without column families).
    """

    row: bytes
    remaining_row: bytes | None = None
    cf_id: int | None = None


def decode_rocksdb_key(
    data: bytes,
    *,
    column_families: bool = False,
    prefix_key_cols: int = 0,
    path: str = "<key>",
) -> EncodedKey:
    """Strip Spark's key framing (§5.8).

    ``[cf id: int16 LE, if column_families]`` then either ``[0x00][row]`` (NoPrefix) or, when
    ``prefix_key_cols > 0``, ``[int32 LE len][0x00 + prefix row][0x00 + remaining row]``.
    """
    raw = bytes(data)
    pos = 0
    cf_id: int | None = None
    if column_families:
        if len(raw) < VIRTUAL_CF_PREFIX_BYTES:
            raise FormatError(path, "key shorter than its 2-byte column family id")
        (cf_id,) = struct.unpack_from("<h", raw, 0)
        pos = VIRTUAL_CF_PREFIX_BYTES
    if prefix_key_cols <= 0:
        return EncodedKey(strip_version(raw[pos:], path=path, what="key", at=pos), None, cf_id)
    if len(raw) - pos < 4:
        raise FormatError(path, "prefix-scan key shorter than its 4-byte length", offset=pos)
    (prefix_len,) = struct.unpack_from("<i", raw, pos)
    pos += 4
    if not 0 < prefix_len <= len(raw) - pos:
        raise FormatError(path, f"prefix length {prefix_len} does not fit the key", offset=pos - 4)
    prefix = strip_version(raw[pos : pos + prefix_len], path=path, what="key prefix", at=pos)
    pos += prefix_len
    # transformWithState ValueState keys of a prefix-scan CF can end here (no remaining part).
    remaining = (
        strip_version(raw[pos:], path=path, what="key remainder", at=pos) if pos < len(raw) else b""
    )
    return EncodedKey(prefix, remaining, cf_id)


def decode_rocksdb_value(data: bytes, *, path: str = "<value>") -> bytes:
    """Strip the 0x00 encoding version byte of a single value; returns the UnsafeRow."""
    return strip_version(bytes(data), path=path, what="value", at=0)


# What RocksDB's StringAppend merge operator puts between merge operands (a list value's
# elements): "," for mergeOperatorVersion=1; 4.3.0 with version 2 still wrote it between the
# operands of different batches.
MERGE_DELIMITER = b","
