"""A Parquet file's footer (``FileMetaData``, Thrift compact protocol), read and written
field by field, to splice the row groups of several writers into one file.

Arrow's Parquet writer encodes on one thread. Row groups are independent, so several
writers can each encode some of them; their bytes go into one file in order, and one
footer lists them all. A row group's bytes are the same whichever writer encoded them, so
only the footer's offsets differ: :func:`spliced_footer` moves each writer's row groups to
where they landed. Every field is kept as read, unknown ones included, and written back
the way Apache Thrift writes it, so a footer read and written again is the same bytes
(``tests/formats/test_parquet_footer.py``).

Field ids are parquet-format's ``parquet.thrift``. Offsets this module does not move (page
indexes, bloom filters, column chunks in other files, encryption) are refused: ckpt's
writer writes none of them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

# Thrift compact protocol types.
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY = range(9)
_LIST, _SET, _MAP, _STRUCT = 9, 10, 11, 12

MAGIC = b"PAR1"
# Deeper than any footer nests (FileMetaData > RowGroup > ColumnChunk > ColumnMetaData >
# Statistics ...): a hostile footer stops here instead of exhausting the stack.
_MAX_DEPTH = 64

# FileMetaData
_NUM_ROWS, _ROW_GROUPS = 3, 4
# RowGroup
_COLUMNS, _RG_NUM_ROWS, _RG_FILE_OFFSET, _ORDINAL = 1, 3, 5, 7
# ColumnChunk
_FILE_PATH, _CC_FILE_OFFSET, _META_DATA = 1, 2, 3
_CC_UNMOVED = {4: "an offset index", 6: "a column index", 8: "encryption", 9: "encryption"}
# ColumnMetaData
_DATA_PAGE, _INDEX_PAGE, _DICTIONARY_PAGE, _BLOOM_FILTER = 9, 10, 11, 14


class FooterError(ValueError):
    """A footer this module cannot read or splice."""


@dataclass
class Field:
    """One field of a struct: its id, its compact type and its value (a struct's value is
    a list of fields; a list's or set's ``(element type, values)``; a map's ``(key type,
    value type, [(key, value)])``)."""

    id: int
    type: int
    value: Any


Struct = list[Field]


def _field(fields: Struct, field_id: int) -> Field | None:
    return next((f for f in fields if f.id == field_id), None)


# -- reading -----------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise FooterError("the footer ends inside a value")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise FooterError("a varint longer than 10 bytes")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise FooterError("the footer ends inside a value")
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out

    def value(self, ttype: int, depth: int) -> Any:
        if ttype in (_TRUE, _FALSE):  # in a container: a byte, 1 true (Thrift's writers)
            return self.byte() == _TRUE
        if ttype == _BYTE:
            return struct.unpack("b", self.take(1))[0]
        if ttype in (_I16, _I32, _I64):
            return self.zigzag()
        if ttype == _DOUBLE:
            return struct.unpack("<d", self.take(8))[0]
        if ttype == _BINARY:
            return self.take(self.varint())
        if depth >= _MAX_DEPTH:
            raise FooterError("the footer nests deeper than any Parquet footer")
        if ttype in (_LIST, _SET):
            head = self.byte()
            size, etype = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            self._check_size(size)
            return (etype, [self.value(etype, depth + 1) for _ in range(size)])
        if ttype == _MAP:
            size = self.varint()
            self._check_size(size)
            if size == 0:
                return (0, 0, [])
            kinds = self.byte()
            ktype, vtype = kinds >> 4, kinds & 0x0F
            items = [
                (self.value(ktype, depth + 1), self.value(vtype, depth + 1)) for _ in range(size)
            ]
            return (ktype, vtype, items)
        if ttype == _STRUCT:
            return self.struct(depth + 1)
        raise FooterError(f"an unknown Thrift type {ttype}")

    def _check_size(self, size: int) -> None:
        # Every element takes at least one byte (an empty struct's stop): a size beyond the
        # bytes left is damage, not a reason to allocate.
        if size > len(self.data) - self.pos:
            raise FooterError(f"a container of {size} elements in fewer bytes")

    def struct(self, depth: int = 0) -> Struct:
        fields: Struct = []
        last = 0
        while True:
            head = self.byte()
            ttype = head & 0x0F
            if ttype == _STOP:
                return fields
            delta = head >> 4
            field_id = last + delta if delta else self.zigzag()
            if ttype in (_TRUE, _FALSE):
                value: Any = ttype == _TRUE
            else:
                value = self.value(ttype, depth)
            fields.append(Field(field_id, ttype, value))
            last = field_id


def read_struct(data: bytes) -> Struct:
    """A Thrift compact struct (a footer's ``FileMetaData``) that fills ``data``."""
    reader = _Reader(data)
    fields = reader.struct()
    if reader.pos != len(data):
        raise FooterError(f"{len(data) - reader.pos} bytes after the footer's struct")
    return fields


# -- writing -----------------------------------------------------------------------------------


def _varint(n: int, out: bytearray) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _zigzag(n: int, out: bytearray) -> None:
    _varint((n << 1) ^ (n >> 63), out)


def _write_value(ttype: int, value: Any, out: bytearray) -> None:
    if ttype in (_TRUE, _FALSE):
        out.append(_TRUE if value else _FALSE)
    elif ttype == _BYTE:
        out += struct.pack("b", value)
    elif ttype in (_I16, _I32, _I64):
        _zigzag(value, out)
    elif ttype == _DOUBLE:
        out += struct.pack("<d", value)
    elif ttype == _BINARY:
        _varint(len(value), out)
        out += value
    elif ttype in (_LIST, _SET):
        etype, items = value
        if len(items) < 15:
            out.append(len(items) << 4 | etype)
        else:
            out.append(0xF0 | etype)
            _varint(len(items), out)
        for item in items:
            _write_value(etype, item, out)
    elif ttype == _MAP:
        ktype, vtype, pairs = value
        _varint(len(pairs), out)
        if pairs:
            out.append(ktype << 4 | vtype)
            for k, v in pairs:
                _write_value(ktype, k, out)
                _write_value(vtype, v, out)
    elif ttype == _STRUCT:
        _write_struct(value, out)
    else:
        raise FooterError(f"an unknown Thrift type {ttype}")


def _write_struct(fields: Struct, out: bytearray) -> None:
    last = 0
    for f in fields:
        ttype = f.type
        if ttype in (_TRUE, _FALSE):
            ttype = _TRUE if f.value else _FALSE
        delta = f.id - last
        if 0 < delta <= 15:
            out.append(delta << 4 | ttype)
        else:
            out.append(ttype)
            _zigzag(f.id, out)
        if f.type not in (_TRUE, _FALSE):
            _write_value(f.type, f.value, out)
        last = f.id
    out.append(_STOP)


def write_struct(fields: Struct) -> bytes:
    """``fields`` in the Thrift compact protocol, as Apache Thrift writes them."""
    out = bytearray()
    _write_struct(fields, out)
    return bytes(out)


# -- files -------------------------------------------------------------------------------------


def footer_of(tail: bytes) -> bytes:
    """The footer's bytes, from the end of a file (at least the footer, its 4-byte length
    and ``PAR1``)."""
    if len(tail) < 8 or tail[-4:] != MAGIC:
        raise FooterError("no PAR1 at the end")
    size = int.from_bytes(tail[-8:-4], "little")
    if size > len(tail) - 8:
        raise FooterError(f"a footer of {size} bytes in a tail of {len(tail)}")
    return tail[-8 - size : -8]


@dataclass(frozen=True)
class Placed:
    """Row group ``index`` of writer ``part``, encoded at ``start`` of that writer's own
    stream and written at ``at`` of the spliced file."""

    part: int
    index: int
    start: int
    end: int
    at: int


def spliced_footer(footers: list[bytes], placed: list[Placed]) -> bytes:
    """One footer for the row groups of several writers' ``footers`` (their ``FileMetaData``
    bytes), in the order of ``placed``: every offset moved to where its row group landed,
    ordinals and the row count made the file's. The first footer gives everything else
    (schema, key-value metadata, created_by); the writers must share them."""
    parsed = [read_struct(f) for f in footers]
    groups: list[list[Struct]] = []
    for i, meta in enumerate(parsed):
        rg = _field(meta, _ROW_GROUPS)
        groups.append(rg.value[1] if rg is not None else [])
        others = [f for f in meta if f.id not in (_NUM_ROWS, _ROW_GROUPS)]
        if i and others != [f for f in parsed[0] if f.id not in (_NUM_ROWS, _ROW_GROUPS)]:
            raise FooterError(f"writer {i}'s footer differs from the first's in more than its rows")
    if sorted((p.part, p.index) for p in placed) != [
        (i, j) for i, g in enumerate(groups) for j in range(len(g))
    ]:
        raise FooterError("the row groups placed are not the writers' row groups")
    row_groups = []
    rows = 0
    for ordinal, p in enumerate(placed):
        group = groups[p.part][p.index]
        _move_row_group(group, p, ordinal)
        rows += _int(group, _RG_NUM_ROWS)
        row_groups.append(group)
    meta = []
    for f in parsed[0]:
        if f.id == _NUM_ROWS:
            f = Field(f.id, f.type, rows)
        elif f.id == _ROW_GROUPS:
            f = Field(f.id, f.type, (_STRUCT, row_groups))
        meta.append(f)
    return write_struct(meta)


def _int(fields: Struct, field_id: int) -> int:
    f = _field(fields, field_id)
    if f is None or not isinstance(f.value, int):
        raise FooterError(f"a required integer field {field_id} is missing")
    return int(f.value)


def _move(fields: Struct, field_id: int, p: Placed) -> None:
    f = _field(fields, field_id)
    # Nothing is at offset 0 (the magic is), so 0 is "none": Arrow writes it for the data
    # page of an empty row group's column and for a chunk's file_offset.
    if f is None or f.value == 0:
        return
    if not p.start <= f.value < p.end:
        raise FooterError(
            f"offset {f.value} (field {field_id}) lies outside its row group's bytes "
            f"{p.start}-{p.end} of writer {p.part}"
        )
    f.value += p.at - p.start


def _move_row_group(group: Struct, p: Placed, ordinal: int) -> None:
    columns = _field(group, _COLUMNS)
    if columns is None:
        raise FooterError("a row group without columns")
    for chunk in columns.value[1]:
        for field_id, what in _CC_UNMOVED.items():
            if _field(chunk, field_id) is not None:
                raise FooterError(f"a column chunk with {what} (not spliced)")
        if _field(chunk, _FILE_PATH) is not None:
            raise FooterError("a column chunk in another file (not spliced)")
        meta = _field(chunk, _META_DATA)
        if meta is None:
            raise FooterError("a column chunk without its metadata")
        if _field(meta.value, _BLOOM_FILTER) is not None:
            raise FooterError("a column chunk with a bloom filter (not spliced)")
        _move(chunk, _CC_FILE_OFFSET, p)  # other writers' first page of the chunk
        for field_id in (_DATA_PAGE, _INDEX_PAGE, _DICTIONARY_PAGE):
            _move(meta.value, field_id, p)
    _move(group, _RG_FILE_OFFSET, p)
    ordinal_field = _field(group, _ORDINAL)
    if ordinal_field is not None:
        ordinal_field.value = (ordinal + 0x8000) % 0x10000 - 0x8000  # an i16, as Arrow casts it
