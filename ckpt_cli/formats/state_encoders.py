"""Spark 4.x RocksDB state key and value encodings (``RocksDBStateEncoder.scala``).

docs/state-formats.md §4, §11, §12 is the spec; names follow Spark's classes. A RocksDB key
of a store is::

    [cf id: int16 LE, multi-family stores only][the key encoder's bytes]

Key encoders (``KeyStateEncoderSpec`` in the state schema file v3):

* ``NoPrefixKeyStateEncoderSpec``: ``[00][key row]``
* ``PrefixKeyScanStateEncoderSpec(n)``: ``[int32 LE len][00][row of the first n columns]``
  ``[00][row of the others]`` (the remainder may be absent)
* ``RangeKeyScanStateEncoderSpec(ordinals)``: ``[int32 LE len][00][range-scan row]``
  ``[00][row of the other columns]``; the range-scan row has one binary field per ordering
  column: a marker (``00`` negative, ``01`` positive or zero, ``02`` null) and the value
  big-endian, negative floats/doubles with every bit flipped
* ``TimestampAsPostfixKeyStateEncoderSpec``: ``[00][key row][int64 BE ts ^ sign bit]``;
  ``TimestampAsPrefixKeyStateEncoderSpec``: ``[int64 BE ts ^ sign bit][00][key row]``; the
  key row holds every key column but the last, which is the timestamp (join v4's
  ``__event_time``)

A "row" is an UnsafeRow, or with ``encoding="avro"`` Avro binary (``avro_state``) preceded
by the 2-byte LE schema id, except for the prefix of a prefix-scan key and the range-scan
row, which carry no schema id. Values: ``[00][value row]`` (``SingleValueStateEncoder``);
lists (``MultiValuedStateEncoder``) are elements ``[int32 LE n][00][value row]`` joined with
no delimiter (``mergeOperatorVersion=2``) or ``,`` (version 1, and whenever RocksDB merged
operands with the OPTIONS file's default delimiter, as rocksdict does). Row checksums
(``rowChecksum.enabled``) put ``[int32 LE CRC32C][int32 LE n]`` in front of each value or
list element; the CRC32C covers the whole RocksDB key and the n bytes after the length.

Decoded keys and values are dicts keyed by ``StructType.unique_names()`` with the Python
values of ``unsaferow``. Bad bytes raise ``FormatError``; a checksum mismatch is returned
(``RowChecksum.ok`` False), never dropped.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import google_crc32c

from ckpt_cli.errors import FormatError
from ckpt_cli.formats import avro_state
from ckpt_cli.formats.spark_types import (
    STRUCT_FORMATS,
    AtomicType,
    DataType,
    StructField,
    StructType,
)
from ckpt_cli.formats.state_schema import KeyEncoderSpec
from ckpt_cli.formats.unsaferow import make_decoder

STATE_ENCODING_VERSION = 0
VIRTUAL_CF_PREFIX_BYTES = 2
SCHEMA_ID_PREFIX_BYTES = 2
ROW_CHECKSUM_BYTES = 4
NEGATIVE_MARKER = 0x00
POSITIVE_MARKER = 0x01
NULL_MARKER = 0x02
# What RocksDB's StringAppendOperator puts between merge operands unless told otherwise.
DEFAULT_MERGE_DELIMITER = 0x2C

NO_PREFIX = "NoPrefixKeyStateEncoderSpec"
PREFIX_SCAN = "PrefixKeyScanStateEncoderSpec"
RANGE_SCAN = "RangeKeyScanStateEncoderSpec"
TS_PREFIX = "TimestampAsPrefixKeyStateEncoderSpec"
TS_POSTFIX = "TimestampAsPostfixKeyStateEncoderSpec"
KEY_ENCODERS = (NO_PREFIX, PREFIX_SCAN, RANGE_SCAN, TS_PREFIX, TS_POSTFIX)

Encoding = Literal["unsaferow", "avro"]
_SIGN_BIT_64 = 1 << 63


# -- small pieces ------------------------------------------------------------------------------


def split_column_family(key: bytes, *, path: str = "<key>") -> tuple[int, bytes]:
    """``(virtual column family id, rest of the key)``: the first 2 bytes, int16 LE."""
    if len(key) < VIRTUAL_CF_PREFIX_BYTES:
        raise FormatError(path, f"key of {len(key)} bytes is shorter than its column family id")
    (cf_id,) = struct.unpack_from("<h", key, 0)
    return cf_id, bytes(key[VIRTUAL_CF_PREFIX_BYTES:])


def strip_version(data: bytes, *, path: str, what: str, at: int = 0) -> bytes:
    """``data`` without its leading ``00`` encoding version byte."""
    if not data:
        raise FormatError(
            path, f"{what} is empty (expected the 0x00 encoding version byte)", offset=at
        )
    if data[0] != STATE_ENCODING_VERSION:
        raise FormatError(
            path,
            f"{what} starts with encoding version {data[0]}, expected {STATE_ENCODING_VERSION}",
            offset=at,
        )
    return bytes(data[1:])


def encode_prefix_scan_key(prefix: bytes, rest: bytes) -> bytes:
    """A RocksDB key of ``PrefixKeyScanStateEncoder`` (no column family): the prefix row's
    length with its version byte (4 bytes, little-endian), the versioned prefix row, the
    versioned remaining row. Checked byte for byte against Spark 4.3's session-window
    store (``spark4-session-rocksdb`` against the same query on the HDFS-backed store)."""
    version = bytes([STATE_ENCODING_VERSION])
    return struct.pack("<i", len(prefix) + 1) + version + prefix + version + rest


def split_prefix_scan_key(data: bytes, *, path: str = "<key>") -> tuple[bytes, bytes]:
    """The prefix row and the remaining row of :func:`encode_prefix_scan_key`'s key."""
    if len(data) < 4:
        raise FormatError(path, "scan key shorter than its 4-byte prefix length")
    (prefix_len,) = struct.unpack_from("<i", data, 0)
    if not 0 < prefix_len < len(data) - 4:
        raise FormatError(path, f"key prefix length {prefix_len} does not fit the key")
    prefix = strip_version(data[4 : 4 + prefix_len], path=path, what="key prefix", at=4)
    rest = strip_version(data[4 + prefix_len :], path=path, what="key remainder")
    return prefix, rest


def split_schema_id(data: bytes, *, path: str, what: str, at: int = 0) -> tuple[int, bytes]:
    """Avro framing: ``(int16 LE schema id, Avro bytes)``."""
    if len(data) < SCHEMA_ID_PREFIX_BYTES:
        raise FormatError(path, f"{what} is shorter than its 2-byte schema id", offset=at)
    (schema_id,) = struct.unpack_from("<h", data, 0)
    return schema_id, bytes(data[SCHEMA_ID_PREFIX_BYTES:])


def decode_ordered_timestamp(data: bytes, *, path: str = "<key>", at: int = 0) -> int:
    """An int64 written big-endian with its sign bit flipped (join v4's event time)."""
    if len(data) != 8:
        raise FormatError(path, f"timestamp of {len(data)} bytes (expected 8)", offset=at)
    value = int.from_bytes(data, "big") ^ _SIGN_BIT_64
    return value - (1 << 64) if value >= _SIGN_BIT_64 else value


def decode_range_scan_value(
    marker: int, data: bytes, data_type: DataType, *, path: str = "<key>", at: int = 0
) -> Any:
    """One ordering column of a range-scan key: ``marker`` and its big-endian bytes."""
    if marker == NULL_MARKER:
        return None
    if marker not in (NEGATIVE_MARKER, POSITIVE_MARKER):
        raise FormatError(
            path, f"range-scan marker 0x{marker:02x} (expected 00, 01 or 02)", offset=at
        )
    name = data_type.name if isinstance(data_type, AtomicType) else None
    fmt = STRUCT_FORMATS.get(name or "")
    if fmt is None:
        raise FormatError(
            path, f"range-scan ordering column of type {data_type.simple_string()}", offset=at
        )
    size = struct.calcsize(fmt)
    if len(data) < size:
        raise FormatError(
            path, f"range-scan {name} value of {len(data)} bytes (needs {size})", offset=at
        )
    raw = bytes(data[:size])
    if name in ("float", "double") and marker == NEGATIVE_MARKER:
        raw = bytes(b ^ 0xFF for b in raw)
    (value,) = struct.unpack(">" + fmt, raw)
    if name not in ("float", "double") and (value < 0) != (marker == NEGATIVE_MARKER):
        raise FormatError(
            path, f"range-scan marker 0x{marker:02x} disagrees with the value {value}", offset=at
        )
    return value


# -- rows ------------------------------------------------------------------------------------

RowDecoder = Callable[[bytes, int], Any]  # (bytes after the version byte, offset) -> dict


def _sub_schema(schema: StructType, ordinals: list[int]) -> StructType:
    return StructType(tuple(schema.fields[i] for i in ordinals))


def _unsafe_rows(schema: StructType, path: str, what: str) -> RowDecoder:
    decode = make_decoder(schema, path=path)

    def row(data: bytes, at: int) -> Any:
        try:
            return decode(data)
        except FormatError as exc:
            raise FormatError(path, f"{what}: {_problem(exc)}", offset=at) from None

    return row


def _avro_rows(
    schema: StructType,
    path: str,
    what: str,
    *,
    with_schema_id: bool,
    writers: Mapping[int, StructType] | None = None,
) -> RowDecoder:
    decoders: dict[int, avro_state.AvroDecoder] = {}
    plain = avro_state.make_struct_decoder(schema, path=path)

    def decoder_for(schema_id: int, at: int) -> avro_state.AvroDecoder:
        if writers is None:
            return plain
        found = decoders.get(schema_id)
        if found is None:
            writer = writers.get(schema_id)
            if writer is None:
                raise FormatError(
                    path,
                    f"{what} was written with schema id {schema_id}, which no state schema "
                    f"file names (known: {sorted(writers)})",
                    offset=at,
                )
            found = avro_state.make_struct_decoder(schema, path=path, writer=writer)
            decoders[schema_id] = found
        return found

    def row(data: bytes, at: int) -> Any:
        decode = plain
        if with_schema_id:
            schema_id, data = split_schema_id(data, path=path, what=what, at=at)
            decode = decoder_for(schema_id, at)
            at += SCHEMA_ID_PREFIX_BYTES
        try:
            return decode(data)
        except FormatError as exc:
            raise FormatError(path, f"{what}: {_problem(exc)}", offset=at) from None

    return row


def _problem(exc: FormatError) -> str:
    prefix = f"{exc.path}: "
    message = exc.message
    return message[len(prefix) :] if message.startswith(prefix) else message


def _rows(
    schema: StructType,
    encoding: Encoding,
    path: str,
    what: str,
    *,
    with_schema_id: bool = True,
    writers: Mapping[int, StructType] | None = None,
) -> RowDecoder:
    if encoding == "avro":
        return _avro_rows(schema, path, what, with_schema_id=with_schema_id, writers=writers)
    if encoding != "unsaferow":
        raise FormatError(path, f"unknown state encoding {encoding!r} (unsaferow or avro)")
    return _unsafe_rows(schema, path, what)


# -- keys ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecodedKey:
    """A decoded RocksDB key: its column family id (None without families) and the key row as
    a dict in key-schema order."""

    cf_id: int | None
    key: dict[str, Any]


KeyDecoder = Callable[[bytes], DecodedKey]


def make_key_decoder(
    key_schema: StructType,
    spec: KeyEncoderSpec,
    *,
    column_families: bool,
    encoding: Encoding = "unsaferow",
    path: str = "<key>",
    key_writers: Mapping[int, StructType] | None = None,
) -> KeyDecoder:
    """Compile ``decode(rocksdb key bytes) -> DecodedKey`` for one column family.

    ``column_families``: the store's keys start with the 2-byte family id (every store whose
    zip ``metadata`` has a ``columnFamilyMapping``). ``key_writers`` maps Avro key schema ids
    to the key schema they were written with (schema evolution); without it the id is not
    checked.
    """
    n = len(key_schema.fields)
    names = key_schema.unique_names()
    kind = spec.kind
    if kind not in KEY_ENCODERS:
        raise FormatError(path, f"unknown key encoder {kind!r}")

    def finish(cf_id: int | None, parts: list[tuple[list[int], Any]]) -> DecodedKey:
        values: list[Any] = [None] * n
        for ordinals, row in parts:
            row_values = list(row.values())
            for i, ordinal in enumerate(ordinals):
                values[ordinal] = row_values[i]
        return DecodedKey(cf_id, dict(zip(names, values, strict=True)))

    def framing(data: bytes) -> tuple[int | None, bytes, int]:
        if column_families:
            cf_id, rest = split_column_family(data, path=path)
            return cf_id, rest, VIRTUAL_CF_PREFIX_BYTES
        return None, bytes(data), 0

    if kind == NO_PREFIX:
        full = _rows(key_schema, encoding, path, "key", writers=key_writers)
        every = list(range(n))

        def no_prefix(data: bytes) -> DecodedKey:
            cf_id, rest, at = framing(data)
            body = strip_version(rest, path=path, what="key", at=at)
            return finish(cf_id, [(every, full(body, at + 1))])

        return no_prefix

    if kind in (TS_PREFIX, TS_POSTFIX):
        if encoding == "avro":
            raise FormatError(path, f"{kind} keys are never Avro-encoded by Spark")
        if n < 1 or key_schema.fields[-1].data_type != AtomicType("long"):
            raise FormatError(path, f"{kind} needs a key schema ending in a long timestamp")
        head = list(range(n - 1))
        key_rows = _rows(_sub_schema(key_schema, head), encoding, path, "key")
        postfix = kind == TS_POSTFIX

        def timestamped(data: bytes) -> DecodedKey:
            cf_id, rest, at = framing(data)
            if len(rest) < 9:
                raise FormatError(path, "timestamped key shorter than 9 bytes", offset=at)
            if postfix:
                ts_at = len(rest) - 8
                ts = decode_ordered_timestamp(rest[ts_at:], path=path, at=at + ts_at)
                body = strip_version(rest[:ts_at], path=path, what="key", at=at)
            else:
                ts = decode_ordered_timestamp(rest[:8], path=path, at=at)
                body = strip_version(rest[8:], path=path, what="key", at=at + 8)
            row = key_rows(body, at + (1 if postfix else 9))
            return finish(cf_id, [(head, row), ([n - 1], {"ts": ts})])

        return timestamped

    if kind == PREFIX_SCAN:
        k = spec.num_cols_prefix_key
        if not 0 < k <= n:
            raise FormatError(path, f"numColsPrefixKey {k} for a key of {n} columns")
        first, others = list(range(k)), list(range(k, n))
        prefix_rows = _rows(
            _sub_schema(key_schema, first), encoding, path, "key prefix", with_schema_id=False
        )
    else:  # RANGE_SCAN
        ordinals = list(spec.ordering_ordinals)
        if (
            not ordinals
            or len(set(ordinals)) != len(ordinals)
            or not all(0 <= o < n for o in ordinals)
        ):
            raise FormatError(path, f"orderingOrdinals {ordinals} for a key of {n} columns")
        first = ordinals
        others = [i for i in range(n) if i not in ordinals]
        ordering = _sub_schema(key_schema, ordinals)
        prefix_rows = _range_scan_rows(ordering, encoding, path)
    rest_rows = _rows(
        _sub_schema(key_schema, others),
        encoding,
        path,
        "key remainder",
        writers=_project_writers(key_writers, others, n, path),
    )

    def split(data: bytes) -> DecodedKey:
        cf_id, rest, at = framing(data)
        if len(rest) < 4:
            raise FormatError(path, "scan key shorter than its 4-byte prefix length", offset=at)
        (prefix_len,) = struct.unpack_from("<i", rest, 0)
        if not 0 < prefix_len <= len(rest) - 4:
            raise FormatError(
                path, f"key prefix length {prefix_len} does not fit the key", offset=at
            )
        prefix = strip_version(rest[4 : 4 + prefix_len], path=path, what="key prefix", at=at + 4)
        parts = [(first, prefix_rows(prefix, at + 5))]
        tail_at = 4 + prefix_len
        if tail_at < len(rest) or others:
            if tail_at == len(rest):
                raise FormatError(
                    path, "key has no remainder after its prefix", offset=at + tail_at
                )
            tail = strip_version(rest[tail_at:], path=path, what="key remainder", at=at + tail_at)
            parts.append((others, rest_rows(tail, at + tail_at + 1)))
        return finish(cf_id, parts)

    return split


def _project_writers(
    writers: Mapping[int, StructType] | None, ordinals: list[int], n: int, path: str
) -> dict[int, StructType] | None:
    """The key remainder's part of each writer key schema (Spark never evolves a key
    schema's columns, only their Avro form)."""
    if writers is None:
        return None
    out = {}
    for schema_id, writer in writers.items():
        if len(writer.fields) != n:
            raise FormatError(
                path,
                f"key schema id {schema_id} has {len(writer.fields)} columns, the key {n}",
            )
        out[schema_id] = _sub_schema(writer, ordinals)
    return out


def _range_scan_rows(ordering: StructType, encoding: Encoding, path: str) -> RowDecoder:
    """The range-scan part: UnsafeRow of binary fields, or an Avro record of (marker, value)
    bytes pairs; both hold a marker byte and the big-endian value per ordering column."""
    types = [f.data_type for f in ordering.fields]
    names = ordering.unique_names()
    if encoding == "avro":
        decode = avro_state.make_avro_decoder(
            avro_state.range_scan_avro_schema(ordering), path=path
        )

        def avro_row(data: bytes, at: int) -> Any:
            record = decode(data)
            values = list(record.values())
            out: dict[str, Any] = {}
            for i, (name, data_type) in enumerate(zip(names, types, strict=True)):
                marker, raw = values[2 * i], values[2 * i + 1]
                if not isinstance(marker, bytes) or len(marker) != 1:
                    raise FormatError(
                        path, f"range-scan marker of column {name!r} is not one byte", offset=at
                    )
                out[name] = decode_range_scan_value(
                    marker[0], raw or b"", data_type, path=path, at=at
                )
            return out

        return avro_row

    binary = StructType(tuple(StructField(name, AtomicType("binary")) for name in names))
    decode_row = make_decoder(binary, path=path)

    def unsafe_row(data: bytes, at: int) -> Any:
        try:
            row = decode_row(data)
        except FormatError as exc:
            raise FormatError(path, f"range-scan key part: {_problem(exc)}", offset=at) from None
        out: dict[str, Any] = {}
        for name, data_type in zip(names, types, strict=True):
            raw = row[name]
            if not raw:
                raise FormatError(path, f"range-scan column {name!r} has no marker", offset=at)
            out[name] = decode_range_scan_value(raw[0], raw[1:], data_type, path=path, at=at)
        return out

    return unsafe_row


# -- values ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RowChecksum:
    """A row checksum as found, and the CRC32C of the bytes it covers (signed int32s, as Java
    stores them)."""

    stored: int
    computed: int

    @property
    def ok(self) -> bool:
        return self.stored == self.computed


def _signed32(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


def crc32c(*parts: bytes) -> int:
    """``java.util.zip.CRC32C`` over the concatenated parts, as a signed int32."""
    crc = 0
    for part in parts:
        crc = google_crc32c.extend(crc, bytes(part))
    return _signed32(crc)


def strip_value_checksum(
    key: bytes, value: bytes, *, path: str = "<value>"
) -> tuple[bytes, RowChecksum]:
    """RocksDB row checksum (``KeyValueChecksumEncoder.encodeValueRowWithChecksum``):
    ``[int32 LE crc][int32 LE n][n bytes]`` -> (the n bytes, the checksum), the CRC32C over the
    whole RocksDB ``key`` then the n bytes."""
    if len(value) < 8:
        raise FormatError(path, f"checksummed value of {len(value)} bytes (needs 8 for its header)")
    stored, size = struct.unpack_from("<ii", value, 0)
    if size != len(value) - 8:
        raise FormatError(
            path, f"checksummed value says {size} bytes follow, {len(value) - 8} do", offset=4
        )
    body = bytes(value[8:])
    return body, RowChecksum(stored, crc32c(key, body))


def strip_key_checksum(data: bytes, *, path: str = "<key>") -> tuple[bytes, RowChecksum]:
    """A delete record's key in the changelog of a RocksDB store with row checksums:
    ``[int32 LE crc][RocksDB key]``, the CRC32C over the key alone (found on every delete of
    ``spark4-tws-checksum``; puts and merges keep plain keys, their values carry the
    checksum)."""
    if len(data) < ROW_CHECKSUM_BYTES:
        raise FormatError(path, f"checksummed key of {len(data)} bytes (needs 4)")
    (stored,) = struct.unpack_from("<i", data, 0)
    key = bytes(data[ROW_CHECKSUM_BYTES:])
    return key, RowChecksum(stored, crc32c(key))


def strip_hdfs_value_checksum(
    key_row: bytes, value: bytes, *, path: str = "<value>"
) -> tuple[bytes, RowChecksum]:
    """HDFS-store row checksum: ``[int32 LE crc][value UnsafeRow]``, the CRC32C over the key
    row then the value row."""
    if len(value) < ROW_CHECKSUM_BYTES:
        raise FormatError(path, f"checksummed value of {len(value)} bytes (needs 4)")
    (stored,) = struct.unpack_from("<i", value, 0)
    body = bytes(value[ROW_CHECKSUM_BYTES:])
    return body, RowChecksum(stored, crc32c(key_row, body))


@dataclass(frozen=True)
class ListElement:
    """One element of a list value: its bytes (version byte included), offset in the value,
    and its row checksum when the store has them."""

    data: bytes
    offset: int
    checksum: RowChecksum | None = None


def split_list_value(
    value: bytes,
    *,
    key: bytes | None = None,
    checksums: bool = False,
    path: str = "<value>",
) -> list[ListElement]:
    """The elements of a multi-valued (list) value.

    Elements are ``[int32 LE n][n bytes]`` (with ``checksums``: ``[int32 LE crc][int32 LE
    n][n bytes]``, the CRC over ``key`` + the n bytes, which themselves are ``[int32 LE
    m][m bytes]``), each starting with the ``00`` version byte, optionally separated by one
    ``,`` (see the module doc). Where a ``,`` could also start a length, the reading that
    accounts for every byte wins; no reading: ``FormatError``.
    """
    data = bytes(value)
    if checksums and key is None:
        raise ValueError("checksummed lists need the key")
    total = len(data)
    header = 8 if checksums else 4

    def element_end(pos: int) -> int | None:
        if total - pos < header:
            return None
        size: int = struct.unpack_from("<i", data, pos + header - 4)[0]
        start = pos + header
        if size < 1 or size > total - start:
            return None
        if checksums:
            if size < 5:
                return None
            (inner,) = struct.unpack_from("<i", data, start)
            if inner != size - 4 or data[start + 4] != STATE_ENCODING_VERSION:
                return None
        elif data[start] != STATE_ENCODING_VERSION:
            return None
        return start + size

    # Positions reachable from 0 by whole elements (and single delimiters between them); a
    # position has at most two successors, so this is linear in the number of elements.
    parent: dict[int, int] = {0: -1}
    todo = [0]
    while todo and total not in parent:
        pos = todo.pop()
        starts = [pos]
        if pos > 0 and pos < total and data[pos] == DEFAULT_MERGE_DELIMITER:
            starts.append(pos + 1)
        for start in starts:
            end = element_end(start)
            if end is not None and end not in parent:
                parent[end] = start
                todo.append(end)
    if total not in parent:
        furthest = max(parent)
        raise FormatError(
            path,
            f"list value does not split into length-prefixed elements (stops at byte "
            f"{furthest} of {total})",
            offset=furthest,
        )
    if total == 0:
        return []
    starts_list: list[int] = []
    pos = total
    while pos != 0:
        start = parent[pos]
        starts_list.append(start)
        pos = start if start in parent else start - 1
    out: list[ListElement] = []
    for start in reversed(starts_list):
        (size,) = struct.unpack_from("<i", data, start + header - 4)
        body = data[start + header : start + header + size]
        checksum = None
        if checksums:
            assert key is not None
            checksum = RowChecksum(struct.unpack_from("<i", data, start)[0], crc32c(key, body))
            body = body[4:]
        out.append(ListElement(body, start, checksum))
    return out


ValueDecoder = Callable[[bytes], Any]


def make_value_decoder(
    value_schema: StructType,
    *,
    encoding: Encoding = "unsaferow",
    path: str = "<value>",
    value_writers: Mapping[int, StructType] | None = None,
) -> ValueDecoder:
    """``decode(value bytes) -> dict`` for a single value or one list element (version byte
    included, checksum header removed). ``value_writers``: Avro schema id -> value schema the
    value was written with (schema evolution); without it the id is not checked."""
    rows = _rows(value_schema, encoding, path, "value", writers=value_writers)

    def decode(data: bytes) -> Any:
        return rows(strip_version(data, path=path, what="value"), 1)

    return decode


# -- one column family -----------------------------------------------------------------------

ENCODING_FORMAT_CONF = "spark.sql.streaming.stateStore.encodingFormat"
ROW_CHECKSUM_CONF = "spark.sql.streaming.stateStore.rowChecksum.enabled"
# Join state format 4: both families of each side hold lists (docs §7).
MULTI_VALUED_JOIN_FAMILIES = (
    "left-keyWithTsToValues",
    "left-tsWithKey",
    "right-keyWithTsToValues",
    "right-tsWithKey",
)


def state_encoding(conf: Mapping[str, str]) -> Encoding:
    """The store encoding recorded in the offsets' conf map (``unsaferow`` when absent)."""
    value = conf.get(ENCODING_FORMAT_CONF, "unsaferow").strip().lower()
    if value not in ("unsaferow", "avro"):
        raise FormatError("offsets", f"unknown {ENCODING_FORMAT_CONF} {value!r}")
    return "avro" if value == "avro" else "unsaferow"


def row_checksums(conf: Mapping[str, str]) -> bool:
    """Whether the stores were written with row checksums (offsets' conf map)."""
    return conf.get(ROW_CHECKSUM_CONF, "false").strip().lower() == "true"


@dataclass(frozen=True)
class DecodedEntry:
    """One RocksDB entry (or changelog record) of a family: the key, the decoded values (one
    for a single value, one per element for a list, none for a delete), and the row checksums
    found (empty without checksums); ``bad_checksums`` says which failed."""

    key: DecodedKey
    values: tuple[Any, ...]
    checksums: tuple[RowChecksum, ...] = ()

    @property
    def bad_checksums(self) -> tuple[int, ...]:
        return tuple(i for i, c in enumerate(self.checksums) if not c.ok)


EntryDecoder = Callable[[bytes, "bytes | None"], DecodedEntry]


def make_family_decoder(
    key_schema: StructType,
    value_schema: StructType,
    spec: KeyEncoderSpec,
    *,
    column_families: bool,
    multi_valued: bool = False,
    encoding: Encoding = "unsaferow",
    checksums: bool = False,
    path: str = "<state>",
    key_writers: Mapping[int, StructType] | None = None,
    value_writers: Mapping[int, StructType] | None = None,
) -> EntryDecoder:
    """``decode(key, value) -> DecodedEntry`` for every entry of one RocksDB column family
    (or the single family of a store without families); ``value`` None is a delete record.

    ``key`` is the RocksDB key as stored. A checksummed changelog's delete record carries
    ``[crc][key]``: pass it through ``strip_key_checksum`` first. ``multi_valued``: list
    state (and join v4's families). Checksum mismatches are returned, not raised.
    """
    keys = make_key_decoder(
        key_schema,
        spec,
        column_families=column_families,
        encoding=encoding,
        path=path,
        key_writers=key_writers,
    )
    values = make_value_decoder(
        value_schema, encoding=encoding, path=path, value_writers=value_writers
    )
    return entry_decoder(keys, values, multi_valued=multi_valued, checksums=checksums, path=path)


def entry_decoder(
    keys: KeyDecoder,
    values: ValueDecoder,
    *,
    multi_valued: bool = False,
    checksums: bool = False,
    path: str = "<state>",
) -> EntryDecoder:
    """:func:`make_family_decoder` over a family's key and value decoders already made (a
    reader that also decodes keys or values alone makes them once)."""

    def decode(key: bytes, value: bytes | None) -> DecodedEntry:
        decoded_key = keys(key)
        if value is None:
            return DecodedEntry(decoded_key, ())
        if multi_valued:
            elements = split_list_value(value, key=key, checksums=checksums, path=path)
            found = tuple(e.checksum for e in elements if e.checksum is not None)
            return DecodedEntry(decoded_key, tuple(values(e.data) for e in elements), found)
        if checksums:
            body, checksum = strip_value_checksum(key, value, path=path)
            return DecodedEntry(decoded_key, (values(body),), (checksum,))
        return DecodedEntry(decoded_key, (values(value),))

    return decode
