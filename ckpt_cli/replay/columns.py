"""Replay in columns: a store's records decoded in batches straight into Arrow
(``formats/unsaferow_arrow``), then the rows of ``rows.RowDecoder`` as Arrow tables and as
JSON lines, built column by column with numpy and pyarrow.compute instead of row by row.

The tables hold the row shape of ``RowDecoder.row`` with the same plain values (timestamps
ISO-8601, dates ISO, decimals and day-time intervals as text, binary as hex; every integer a
``int64``), their Arrow types derived from the state schema, so every batch of a replay has
the same types. The JSON lines are byte for byte ``RowDecoder.line``'s.

``columnar_for`` is the one place that chooses: a store whose schema has a map, a type
without a columnar decoder, or a decoder of another row shape (join sides, prefix-scan
keys) is replayed row by row; so is any batch the columnar path cannot vouch for (a row
``unsaferow_arrow`` refuses, a year outside 1-9999, a non-finite float in JSON), which the
row path then decodes or fails on with its own error.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing
from decimal import Context
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any

import orjson

from ckpt_cli.errors import FormatError
from ckpt_cli.formats import schema as S
from ckpt_cli.model import Checkpoint
from ckpt_cli.replay.plan import ReplayPlan
from ckpt_cli.replay.read import iter_state

if TYPE_CHECKING:
    from ckpt_cli.replay.rows import RowDecoder
    from ckpt_cli.replay.source import StateRows

BATCH_ROWS = 65536
_DECIMAL_CONTEXT = Context(prec=100)
# Years 1-9999, as Python's datetime (the row path's limits).
_MIN_DAY = -719162
_MAX_DAY = 2932896
_DAY_US = 86_400_000_000


# False replays everything row by row (benchmarks compare the two paths).
ENABLED = True


class _RowPath(Exception):
    """This batch goes through the row path."""


def columnar_for(decoder: RowDecoder) -> Columnar | None:
    """The columnar replay of ``decoder``'s store, or None when it replays row by row."""
    from ckpt_cli.replay.rows import RowDecoder

    if not ENABLED or type(decoder) is not RowDecoder or decoder.schema is None:
        return None
    try:
        import numpy  # noqa: F401
        import pyarrow  # noqa: F401

        from ckpt_cli.formats.unsaferow_arrow import ColumnarUnsupported, check_supported
    except ImportError:
        return None
    try:
        check_supported(decoder.schema.key)
        check_supported(decoder.schema.value)
    except ColumnarUnsupported:
        return None
    if _has_map(decoder.schema.key) or _has_map(decoder.schema.value):
        return None  # a map's plain value is a dict keyed by str(key): the row path's
    return Columnar(decoder)


def _has_map(t: S.DataType) -> bool:
    while isinstance(t, S.UserDefinedType):
        t = t.sql_type
    if isinstance(t, S.MapType):
        return True
    if isinstance(t, S.ArrayType):
        return _has_map(t.element_type)
    if isinstance(t, S.StructType):
        return any(_has_map(f.data_type) for f in t.fields)
    return False


def batches(
    pairs: Iterable[tuple[bytes, bytes | None]], size: int = BATCH_ROWS
) -> Iterator[Sequence[tuple[bytes, bytes | None]]]:
    it = iter(pairs)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


class Columnar:
    """Batches of one store's raw ``(key, value)`` records to Arrow tables and JSON lines."""

    def __init__(self, decoder: RowDecoder) -> None:
        import pyarrow as pa

        assert decoder.schema is not None
        self.decoder = decoder
        self.schema = decoder.schema
        self._rocks = decoder._rocks
        self.key_type = plain_type(self.schema.key)
        self.value_type = plain_type(self.schema.value)
        self.arrow_schema = pa.schema(
            [
                pa.field("partition_id", pa.int64()),
                pa.field("key", self.key_type),
                pa.field("value", self.value_type),
            ]
        )
        # Floats as today's JSON lines have them: repr from the generated encoder, else orjson.
        self._repr_floats = decoder.compiled

    # -- decoding ----------------------------------------------------------------------------

    def _decode(self, rows: list[bytes], schema: S.StructType, *, value: bool) -> Any:
        import numpy as np

        from ckpt_cli.formats.unsaferow_arrow import ColumnarUnsupported, decode_rows

        sizes = np.fromiter(map(len, rows), np.int64, len(rows))
        offsets = np.cumsum(sizes) - sizes
        data = b"".join(rows)
        if self._rocks:
            # [00][row]: any other first byte is the row path's error.
            if len(rows) and (
                bool((sizes < 1).any()) or np.frombuffer(data, np.uint8)[offsets].any()
            ):
                raise _RowPath
            offsets += 1
            sizes -= 1
        elif value:
            sizes &= ~7  # Spark < 2.3 appended 4 junk bytes to values
        try:
            return decode_rows(data, offsets, sizes, schema, path=self.decoder.path)
        except (FormatError, ColumnarUnsupported):
            raise _RowPath from None

    def native(self, pairs: Sequence[tuple[bytes, bytes | None]]) -> tuple[Any, Any]:
        """The keys and values of a batch (every value present) as Arrow struct arrays of
        their natural types."""
        keys = [k for k, _ in pairs]
        values = [v for _, v in pairs]
        if any(v is None for v in values):
            raise _RowPath
        key = self._decode(keys, self.schema.key, value=False)
        value = self._decode(values, self.schema.value, value=True)  # type: ignore[arg-type]
        return key, value

    # -- Arrow tables ----------------------------------------------------------------------------

    def table(self, partition: int, pairs: Sequence[tuple[bytes, bytes | None]]) -> Any:
        """One batch as a table of ``arrow_schema`` (the row path's rows when it must)."""
        import pyarrow as pa

        try:
            key, value = self.native(pairs)
            arrays = [
                pa.repeat(pa.scalar(partition, pa.int64()), len(pairs)),
                plain(key, self.schema.key),
                plain(value, self.schema.value),
            ]
            return pa.Table.from_arrays(arrays, schema=self.arrow_schema)
        except _RowPath:
            rows = [self.decoder.row(partition, k, v) for k, v in pairs]
            return pa.Table.from_pylist(rows, schema=self.arrow_schema)

    # -- JSON lines --------------------------------------------------------------------------

    def lines(self, partition: int, pairs: Sequence[tuple[bytes, bytes | None]]) -> str:
        """One batch as JSON lines, the text ``RowDecoder.line`` gives for each record."""
        import pyarrow.compute as pc

        try:
            key, value = self.native(pairs)
            key_text = json_text(plain(key, self.schema.key), self._repr_floats)
            value_text = json_text(plain(value, self.schema.value), self._repr_floats)
        except _RowPath:
            line = self.decoder.line
            return "".join(line(partition, k, v) for k, v in pairs)  # type: ignore[arg-type]
        text = pc.binary_join_element_wise(
            f'{{"partition_id":{partition},"key":', key_text, ',"value":', value_text, "}\n", ""
        )
        return _concatenated(text).decode("utf-8") if len(text) else ""


# -- a partition's rows, a batch at a time -------------------------------------------------------


def line_chunks(
    ckpt: Checkpoint, plan: ReplayPlan, decoder: RowDecoder, limit: int | None = None
) -> Iterator[tuple[str, int]]:
    """A partition's JSON lines (unfiltered), a batch at a time: ``(text, rows)``; at most
    ``limit`` rows."""
    columnar = columnar_for(decoder)
    pid = plan.partition
    with closing(iter_state(ckpt, plan)) as pairs:
        for chunk in batches(itertools.islice(pairs, limit)):
            if columnar is not None:
                yield columnar.lines(pid, chunk), len(chunk)
            else:
                line = decoder.line
                yield "".join(line(pid, k, v) for k, v in chunk), len(chunk)  # type: ignore[arg-type]


def state_tables(rows: StateRows, limit: int | None = None) -> Iterator[Any]:
    """The rows as ``pyarrow.Table`` batches (at least one, empty when there are no rows):
    of the columnar schema when the store replays in columns, else ``arrow_tables``'s."""
    from ckpt_cli.replay.rows import arrow_tables

    columnar = None
    if rows.changes is None and rows.state_var is None and rows.matches is None:
        columnar = columnar_for(rows.decoder)
    if columnar is None:
        yield from arrow_tables(itertools.islice(rows, limit))
        return
    yield from plan_tables(rows.ckpt, rows.plans, columnar, limit)


def plan_tables(
    ckpt: Checkpoint, plans: Iterable[ReplayPlan], columnar: Columnar, limit: int | None = None
) -> Iterator[Any]:
    """The state of the plans' partitions as tables of ``columnar.arrow_schema``, a batch at
    a time (at least one, empty when there are no rows); at most ``limit`` rows."""
    left = limit
    sent = False
    for plan in plans:
        with closing(iter_state(ckpt, plan)) as pairs:
            for chunk in batches(itertools.islice(pairs, left)):
                yield columnar.table(plan.partition, chunk)
                sent = True
                if left is not None:
                    left -= len(chunk)
        if left == 0:
            break
    if not sent:
        yield columnar.arrow_schema.empty_table()


def _concatenated(text: Any) -> bytes:
    """The bytes of a string array without nulls, one value after another."""
    import numpy as np

    offsets = np.frombuffer(text.buffers()[1], np.int32, len(text) + 1, 4 * text.offset)
    data: bytes = text.buffers()[2].to_pybytes()
    return data[int(offsets[0]) : int(offsets[-1])]


# -- plain values: the row path's JSON values, as Arrow columns ---------------------------------


def plain_type(t: S.DataType) -> Any:
    """The Arrow type of a column's plain values."""
    import pyarrow as pa

    while isinstance(t, S.UserDefinedType):
        t = t.sql_type
    if isinstance(t, S.StructType):
        return pa.struct(
            [
                pa.field(name, plain_type(f.data_type))
                for name, f in zip(t.unique_names(), t.fields, strict=True)
            ]
        )
    if isinstance(t, S.ArrayType):
        return pa.list_(plain_type(t.element_type))
    if isinstance(t, S.AtomicType):
        if t.name == "boolean":
            return pa.bool_()
        if t.name in ("byte", "short", "integer", "long"):
            return pa.int64()
        if t.name in ("float", "double"):
            return pa.float64()
        if t.name == "void":
            return pa.null()
    if isinstance(t, S.YearMonthIntervalType):
        return pa.int64()
    return pa.string()


def plain(array: Any, t: S.DataType) -> Any:
    """A column of ``unsaferow_arrow`` values as the row path's plain JSON values."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    while isinstance(t, S.UserDefinedType):
        t = t.sql_type
    mask = pc.is_null(array) if array.null_count else None
    if isinstance(t, S.StructType):
        children = [plain(array.field(i), f.data_type) for i, f in enumerate(t.fields)]
        if not children:
            return pa.StructArray.from_buffers(pa.struct([]), len(array), [_validity(array)])
        return pa.StructArray.from_arrays(children, fields=list(plain_type(t)), mask=mask)
    if isinstance(t, S.ArrayType):
        values = plain(array.values, t.element_type)
        return pa.ListArray.from_arrays(array.offsets, values, plain_type(t), mask=mask)
    target = plain_type(t)
    if isinstance(t, S.AtomicType) and t.name in ("timestamp", "timestamp_ntz", "date"):
        raw = array.cast(pa.int64() if t.name != "date" else pa.int32())
        numbers = np.asarray(raw.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        if t.name == "date":
            text = _format_dates(numbers)
        else:
            text = _format_timestamps(numbers, "Z" if t.name == "timestamp" else "")
        return _fixed_width_strings(text, array)
    if isinstance(t, S.AtomicType) and t.name == "binary":
        return _hex(array)
    if isinstance(t, S.DecimalType):
        return pa.array(
            [None if d is None else str(d.scaleb(0, _DECIMAL_CONTEXT)) for d in array.to_pylist()],
            pa.string(),
        )
    if isinstance(t, S.DayTimeIntervalType):
        return pa.array([None if d is None else str(d) for d in array.to_pylist()], pa.string())
    return array.cast(target)


def _validity(array: Any) -> Any:
    return array.buffers()[0] if array.null_count else None


def _digits(out: Any, column: int, values: Any, width: int) -> None:
    """``values`` (non-negative) as ``width`` ASCII digits at ``out[:, column:]``."""
    for i in range(width - 1, -1, -1):
        out[:, column + i] = 48 + values % 10
        values = values // 10


def _civil(days: Any) -> tuple[Any, Any, Any]:
    """Year, month, day of days since 1970-01-01 (proleptic Gregorian; Howard Hinnant's
    ``civil_from_days``), vectorised."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 - 12 * (mp >= 10)
    year = yoe + era * 400 + (month <= 2)
    return year, month, day


def _format_dates(days: Any) -> Any:
    import numpy as np

    if len(days) and (days.min() < _MIN_DAY or days.max() > _MAX_DAY):
        raise _RowPath
    year, month, day = _civil(days)
    out = np.full((len(days), 10), ord("-"), np.uint8)
    _digits(out, 0, year, 4)
    _digits(out, 5, month, 2)
    _digits(out, 8, day, 2)
    return out


def _format_timestamps(micros: Any, suffix: str) -> Any:
    """``YYYY-MM-DDTHH:MM:SS.ffffff`` + suffix, as ``rows.format_timestamp`` writes it."""
    import numpy as np

    days, rest = np.divmod(micros, _DAY_US)
    out = np.empty((len(micros), 26 + len(suffix)), np.uint8)
    out[:, :10] = _format_dates(days)
    out[:, 10] = ord("T")
    seconds, fraction = np.divmod(rest, 1_000_000)
    _digits(out, 11, seconds // 3600, 2)
    out[:, 13] = ord(":")
    _digits(out, 14, seconds // 60 % 60, 2)
    out[:, 16] = ord(":")
    _digits(out, 17, seconds % 60, 2)
    out[:, 19] = ord(".")
    _digits(out, 20, fraction, 6)
    if suffix:
        out[:, 26] = ord(suffix)
    return out


def _fixed_width_strings(text: Any, like: Any) -> Any:
    """A string array of the rows of ``text`` (an (n, w) uint8 array), null where ``like``
    is null."""
    import numpy as np
    import pyarrow as pa

    n, width = text.shape
    offsets = np.arange(n + 1, dtype=np.int32) * width
    return pa.Array.from_buffers(
        pa.string(),
        n,
        [_validity_of(like), pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(text))],
    )


def _validity_of(array: Any) -> Any:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if not array.null_count:
        return None
    valid = pc.is_valid(array).to_numpy(zero_copy_only=False)
    return pa.py_buffer(np.packbits(valid, bitorder="little").tobytes())


_HEX = None


def _hex(array: Any) -> Any:
    """Binary values as lowercase hex text."""
    import numpy as np
    import pyarrow as pa

    global _HEX
    if _HEX is None:
        _HEX = np.frombuffer(b"".join(f"{i:02x}".encode() for i in range(256)), np.uint16)
    offsets = np.frombuffer(array.buffers()[1], np.int32, len(array) + 1, 4 * array.offset)
    data = np.frombuffer(array.buffers()[2] or b"", np.uint8)[int(offsets[0]) : int(offsets[-1])]
    text = _HEX[data]
    return pa.Array.from_buffers(
        pa.string(),
        len(array),
        [
            _validity_of(array),
            pa.py_buffer(((offsets - offsets[0]) * 2).astype(np.int32)),
            pa.py_buffer(text),
        ],
    )


# -- JSON text ------------------------------------------------------------------------------


def json_text(array: Any, repr_floats: bool) -> Any:
    """Each plain value as JSON text (``null`` for nulls): what ``orjson.dumps`` (or the
    generated encoder, with ``repr_floats``) writes for the row path's value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = array.type
    n = len(array)
    if pa.types.is_null(t):
        return pa.repeat(pa.scalar("null"), n)
    if pa.types.is_struct(t):
        parts: list[Any] = []
        for i in range(t.num_fields):
            name = encode_basestring(t.field(i).name)
            parts += [("{" if i == 0 else ",") + name + ":", json_text(array.field(i), repr_floats)]
        parts.append("}" if parts else "{}")
        text = pc.binary_join_element_wise(*parts, "") if n else pa.array([], pa.string())
        if isinstance(text, pa.Scalar):
            text = pa.repeat(text, n)
    elif pa.types.is_list(t):
        elements = json_text(array.values, repr_floats)
        joined = pc.binary_join(pa.ListArray.from_arrays(array.offsets, elements), ",")
        text = pc.binary_join_element_wise("[", joined, "]", "")
    elif pa.types.is_floating(t):
        text = _floats(array, repr_floats)
    elif pa.types.is_string(t):
        text = _quoted(array)
    else:  # booleans and integers
        text = array.cast(pa.string())
    if array.null_count:
        text = pc.if_else(pc.is_null(array), "null", text)
    return text


def _floats(array: Any, repr_floats: bool) -> Any:
    import pyarrow as pa

    values = array.to_pylist()
    if any(v is not None and not math.isfinite(v) for v in values):
        raise _RowPath  # the row path writes them as strings
    if repr_floats:
        return pa.array(["null" if v is None else repr(v) for v in values], pa.string())
    return pa.array(orjson.dumps(values)[1:-1].decode().split(","), pa.string())


def _quoted(array: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    filled = array.fill_null("")
    if len(filled) and pc.any(pc.match_substring_regex(filled, "[\\x00-\\x1f]")).as_py():
        return pa.array([encode_basestring(s) for s in filled.to_pylist()], pa.string())
    escaped = pc.replace_substring(filled, "\\", "\\\\")
    escaped = pc.replace_substring(escaped, '"', '\\"')
    return pc.binary_join_element_wise('"', escaped, '"', "")
