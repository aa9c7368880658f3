"""RocksDB state store versions on disk: the ``<v>.zip`` and its ``metadata`` entry (the SST
and log files a version needs), read within the inflation limits, and a local DB directory
rebuilt from the zip plus the shared ``SSTs/`` and ``logs/`` files.

docs/spark-checkpoint-format.md §5.1-§5.3 and Appendix C. Storage access stays with the
caller: ``rebuild_db_dir`` fetches shared files through a callback. Reading the rebuilt DB
and Spark's key/value encoding are ``formats/rocksdb``.
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
from typing import Any, BinaryIO

from ckpt_cli.errors import (
    FormatError,
    LimitExceededError,
    UnsupportedVersionError,
    unsupported_hint,
)
from ckpt_cli.formats import limits as lim
from ckpt_cli.formats.limits import Limits

METADATA_ENTRY = "metadata"
# The metadata's first line. Spark 3.2-3.5 and 4.1+ write "v1"; Spark 4.0 writes
# "v" + spark.sql.streaming.stateStore.checkpointFormatVersion ("v2" in format-v2 zips; the
# JSON is the same). RocksDBCheckpointMetadata.VERSION in each version's spark-sql jar.
ZIP_METADATA_VERSIONS = (1, 2)
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
    """An entry of a ``<v>.zip`` as its central directory lists it: the name, the size and
    the size compressed."""

    name: str
    size: int
    compressed_size: int


@dataclass(frozen=True)
class ZipContents:
    """What ``read_zip`` finds in a ``<v>.zip``: its entries and its parsed ``metadata``."""

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
                raise size_differs(remote, size, f.size_bytes, path)
    return metadata


def size_differs(path: str, size: int, recorded: int, zip_path: str) -> FormatError:
    """A shared file whose size is not the one its zip's metadata records."""
    return FormatError(
        path,
        f"size {size} bytes differs from the {recorded} bytes recorded "
        f"in {zip_path} (Spark refuses to load this version)",
    )
