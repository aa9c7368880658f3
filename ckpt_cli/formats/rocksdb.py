"""A RocksDB state store version's rebuilt DB directory (``formats/rocksdb_zip`` rebuilds
it): its pairs in key order, and Spark's key/value encoding.

docs/spark-checkpoint-format.md §5.8. What was checked against real Spark 4.3.0 files
(tests/formats/data_rows): NoPrefix keys and values (``0x00`` + UnsafeRow), PrefixKeyScan keys
(session window and transformWithState MapState), the 2-byte virtual column family prefix of
transformWithState, and ListState values. RangeKeyScan keys, Avro encoding and row checksums
are not decoded here: ``formats/state_encoders.py`` decodes every Spark 4.x key encoder, Avro
and row checksums, per column family of the state schema file v3.
"""

from __future__ import annotations

import itertools
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ckpt_cli.errors import (
    FormatError,
    LimitExceededError,
)
from ckpt_cli.formats.limits import Limits
from ckpt_cli.formats.state_encoders import strip_version

VIRTUAL_CF_PREFIX_BYTES = 2


def _dir_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


# Pairs per chunk: per-chunk costs vanish, memory stays small.
DB_CHUNK_PAIRS = 16384


def iter_db(
    dest_dir: str | os.PathLike[str], *, path: str | None = None, limits: Limits | None = None
) -> Iterator[tuple[bytes, bytes]]:
    """All ``(key, value)`` pairs of a rebuilt DB directory in RocksDB (bytewise) key order
    (``iter_db_flat``'s chunks a pair at a time)."""
    for flat, _ in iter_db_flat(dest_dir, path=path, limits=limits):
        it = iter(flat)
        yield from zip(it, it, strict=True)


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
