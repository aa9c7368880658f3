"""Decoded records to rows: the one encoder behind every output of ``ckpt replay``.

``RowDecoder`` turns a store's raw key/value bytes into the rows of Spark's ``statestore``
source, ``{"partition_id", "key": {...}, "value": {...}}``, with plain JSON values:
timestamps ISO-8601 (``Z`` for UTC), dates ISO, decimals as strings (exact), binary as hex,
non-finite floats as strings. CSV, the change feed and every store ``replay.columns`` does
not take are made from these rows; ``replay.columns`` gives the same rows in Arrow batches.

Two things make that fast without a second meaning of a row: the conversion to plain JSON is
compiled per schema (``struct_converter``: JSON-native columns pass untouched), and for
schemas of flat columns (booleans, integers, floats, strings, dates, timestamps, void)
``RowDecoder.line`` formats UnsafeRow bytes straight into JSON text with code generated once
per schema (``compile_row``), giving the JSON ``orjson.dumps(row)`` gives. Rows it cannot
handle exactly (a string pointing outside the row, a date outside years 1-9999, a non-finite
float, bytes too short) take the general path, which decodes them or raises FormatError.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping
from decimal import Decimal
from json.encoder import encode_basestring
from typing import Any

import orjson

from ckpt_cli.formats import rocksdb
from ckpt_cli.formats import spark_types as S
from ckpt_cli.formats.state_encoders import make_key_decoder
from ckpt_cli.formats.state_schema import KeyEncoderSpec, StateSchema
from ckpt_cli.formats.unsaferow import make_decoder
from ckpt_cli.install import missing_extra
from ckpt_cli.state.target import SelectionError
from ckpt_cli.state.where import parse_where, schema_columns

Converter = Callable[[Any], Any]
# A test of a row ``{"key": ..., "value": ...}`` (``--where``).
Filter = Callable[[Mapping[str, Any]], bool]

ARROW_BATCH_ROWS = 65536


class RowDecoder:
    """A store's raw key/value bytes to rows, for one schema (None: keys and values as hex).

    HDFS values are read as ``valueSize & ~7`` bytes (Spark < 2.3 appended 4 junk bytes);
    RocksDB keys and values lose their encoding version byte. New state encodings
    (transformWithState column families, Avro) are further decoders giving the same rows.
    """

    def __init__(self, schema: StateSchema | None, provider: str, *, path: str = "<state>") -> None:
        self.schema = schema
        self.path = path
        self._rocks = provider == "rocksdb"
        self._key = make_decoder(schema.key, path=path) if schema else None
        self._value = make_decoder(schema.value, path=path) if schema else None

    def key(self, data: bytes) -> Any:
        row = rocksdb.decode_rocksdb_key(data, path=self.path).row if self._rocks else data
        return self._key(row) if self._key else row.hex()

    def value(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if self._rocks:
            row = rocksdb.decode_rocksdb_value(data, path=self.path)
        else:
            row = data[: len(data) & ~7]
        return self._value(row) if self._value else row.hex()

    def __call__(self, key: bytes, value: bytes | None) -> tuple[Any, Any]:
        return self.key(key), self.value(value)

    @functools.cached_property
    def _to_json(self) -> tuple[Converter, Converter]:
        if self.schema is None:
            return _identity, _identity  # hex strings
        return struct_converter(self.schema.key), struct_converter(self.schema.value)

    def json_row(self, key: bytes, value: bytes | None) -> tuple[Any, Any]:
        """Key and value as plain JSON (what ``json_value`` gives, compiled for the schema)."""
        to_key, to_value = self._to_json
        return to_key(self.key(key)), to_value(self.value(value))

    def json_key(self, key: bytes) -> Any:
        """The key alone as ``json_row`` gives it (no value decoded)."""
        return self._to_json[0](self.key(key))

    def row(self, partition: int, key: bytes, value: bytes | None) -> dict[str, Any]:
        k, v = self.json_row(key, value)
        return {"partition_id": partition, "key": k, "value": v}

    @functools.cached_property
    def _compiled(self) -> tuple[_Compiled, _Compiled] | None:
        if self.schema is None:
            return None
        key, value = compile_row(self.schema.key), compile_row(self.schema.value)
        return (key, value) if key is not None and value is not None else None

    @property
    def compiled(self) -> bool:
        """Whether ``line`` has the generated fast path for this schema."""
        return self._compiled is not None

    def line(self, partition: int, key: bytes, value: bytes) -> str:
        """``row`` as one JSON line (the replay hot path)."""
        compiled = self._compiled
        if compiled is not None:
            to_key, to_value = compiled
            try:
                if self._rocks:
                    if key[:1] != b"\x00" or value[:1] != b"\x00":
                        raise Fallback
                    k = to_key(key, 1, len(key))
                    v = to_value(value, 1, len(value))
                else:
                    k = to_key(key, 0, len(key))
                    v = to_value(value, 0, len(value) & ~7)
                return f'{{"partition_id":{partition},"key":{k},"value":{v}}}\n'
            except (Fallback, struct.error, IndexError):
                pass
        row = self.row(partition, key, value)
        return orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE).decode()


def row_filter(where: Iterable[tuple[str, str] | str], schema: StateSchema | None) -> Filter | None:
    """Rows ``{"key", "value"}`` that pass every condition of ``where``: ``--where``
    expressions (:mod:`ckpt_cli.state.where`, over key and value columns), or the older
    ``COLUMN=VALUE`` pairs (the key's column equals VALUE compared as JSON text; ``null``
    matches a null column); None when there is nothing to filter on."""
    conditions = list(where)
    if not conditions:
        return None
    if schema is None:
        raise SelectionError("{where} needs the store's schema file, and there is none")
    names = set(schema.key.unique_names())
    columns = schema_columns(schema.key, schema.value)
    tests: list[Filter] = []
    for condition in conditions:
        if isinstance(condition, str):
            tests.append(parse_where(condition, columns))
            continue
        column, value = condition
        if column not in names:
            raise SelectionError(
                f"{{where}} {f'{column}={value}'!r}: the key has no column {column!r} "
                f"(columns: {', '.join(sorted(names))})"
            )
        tests.append(functools.partial(_key_equals, column, value))
    if len(tests) == 1:
        return tests[0]
    return lambda row: all(test(row) for test in tests)


def _key_equals(column: str, value: str, row: Mapping[str, Any]) -> bool:
    key = row["key"]
    got = json_value(key.get(column)) if isinstance(key, dict) else None
    if got is None and value.lower() == "null":
        return True
    if not isinstance(got, str):
        got = json.dumps(got)
    return bool(got == value)


# -- Arrow ----------------------------------------------------------------------------------


def require_pyarrow(what: str) -> None:
    """MissingExtraError naming ``what`` when pyarrow is not installed."""
    try:
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise missing_extra(what, "parquet", exc) from exc


def arrow_tables(rows: Iterable[dict[str, Any]], schema: Any = None) -> Iterator[Any]:
    """Rows as ``pyarrow.Table`` batches of up to ``ARROW_BATCH_ROWS`` (at least one, empty
    when there are no rows), of ``schema`` when given, else with types inferred from the
    values (``Table.from_pylist``: a column null in every row of a batch is then of type
    null there)."""
    require_pyarrow("Arrow output")
    import pyarrow as pa

    def table(batch: list[dict[str, Any]]) -> Any:
        if schema is not None:
            try:
                return pa.Table.from_pylist(batch, schema=schema)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
                pass  # a value of no such type here (a non-finite float is text): inferred
        return pa.Table.from_pylist(batch)

    batch: list[dict[str, Any]] = []
    sent = False
    for row in rows:
        batch.append(row)
        if len(batch) >= ARROW_BATCH_ROWS:
            yield table(batch)
            batch, sent = [], True
    if batch or not sent:
        yield table(batch)


def json_arrow_type(data_type: S.DataType) -> Any:
    """The Arrow type of a column of Spark type ``data_type`` in rows of ``json_value``s
    (timestamps, dates, decimals and binary are text there), or None when there is none
    to give (the types are then inferred)."""
    import pyarrow as pa

    t = data_type
    while isinstance(t, S.UserDefinedType):
        t = t.sql_type
    if isinstance(t, S.AtomicType):
        by_name = {
            "boolean": pa.bool_(),
            "byte": pa.int64(),
            "short": pa.int64(),
            "integer": pa.int64(),
            "long": pa.int64(),
            "float": pa.float64(),
            "double": pa.float64(),
            "string": pa.string(),
            "binary": pa.string(),
            "date": pa.string(),
            "timestamp": pa.string(),
            "timestamp_ntz": pa.string(),
            "void": pa.null(),
        }
        return by_name.get(t.name)
    if isinstance(t, (S.StringLikeType, S.DecimalType, S.TimeType, S.DayTimeIntervalType)):
        return pa.string()
    if isinstance(t, S.YearMonthIntervalType):
        return pa.int64()
    if isinstance(t, S.StructType):
        fields = [json_arrow_type(f.data_type) for f in t.fields]
        if any(f is None for f in fields):
            return None
        return pa.struct(list(zip(t.unique_names(), fields, strict=True)))
    if isinstance(t, S.ArrayType):
        element = json_arrow_type(t.element_type)
        return None if element is None else pa.list_(element)
    if isinstance(t, S.MapType):
        # json_value gives an atomic-keyed map a dict with text keys.
        value = json_arrow_type(t.value_type)
        atomic = isinstance(t.key_type, (S.AtomicType, S.StringLikeType, S.DecimalType))
        return pa.map_(pa.string(), value) if atomic and value is not None else None
    return None


# -- plain JSON values -----------------------------------------------------------------------


def json_value(value: Any) -> Any:
    """A decoded value as plain JSON: timestamps ISO-8601 in UTC with ``Z`` (naive ones as
    they are), dates ISO, decimals as strings (exact), binary as hex, non-finite floats as
    strings."""
    if isinstance(value, dt.datetime):
        return format_timestamp(value)
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _identity(value: Any) -> Any:
    return value


def _float(value: Any) -> Any:
    if value is None or math.isfinite(value):
        return value
    return str(value)


def format_timestamp(value: dt.datetime) -> str:
    """ISO-8601 with microseconds and a 4-digit year; aware values in UTC with ``Z``
    (``strftime("%Y")`` would drop the leading zeros of years before 1000)."""
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc)
        suffix = "Z"
    else:
        suffix = ""
    return (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d}T{value.hour:02d}:"
        f"{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}{suffix}"
    )


def _unless_null(convert: Converter) -> Converter:
    return lambda value: None if value is None else convert(value)


_timestamp = _unless_null(format_timestamp)
_iso = _unless_null(lambda value: value.isoformat())
_str = _unless_null(str)
_hex = _unless_null(lambda value: bytes(value).hex())


def converter_for(data_type: S.DataType) -> Converter:
    """A function turning a decoded value of ``data_type`` into plain JSON."""
    if isinstance(data_type, S.AtomicType):
        name = data_type.name
        if name in ("boolean", "byte", "short", "integer", "long", "string", "void"):
            return _identity
        if name in ("float", "double"):
            return _float
        if name in ("timestamp", "timestamp_ntz"):
            return _timestamp
        if name == "date":
            return _iso
        if name == "binary":
            return _hex
        return json_value
    if isinstance(data_type, S.StringLikeType):
        return _identity
    if isinstance(data_type, S.DecimalType):
        return _str
    if isinstance(data_type, S.StructType):
        return struct_converter(data_type)
    if isinstance(data_type, S.ArrayType):
        element = converter_for(data_type.element_type)
        if element is _identity:
            return _identity
        return lambda v: None if v is None else [element(x) for x in v]
    return json_value


def struct_converter(schema: S.StructType) -> Converter:
    """For a decoded struct (a dict keyed by ``unique_names()``), converted in place."""
    names = schema.unique_names()
    convs = [converter_for(f.data_type) for f in schema.fields]
    special = [(n, c) for n, c in zip(names, convs, strict=True) if c is not _identity]
    if not special:
        return _identity

    def convert(row: Any) -> Any:
        # Decoded rows are fresh dicts: converted in place.
        if row is None:
            return None
        for name, conv in special:
            row[name] = conv(row[name])
        return row

    return convert


# -- JSON text straight from UnsafeRow bytes ---------------------------------------------------


_FLAT = {
    **S.STRUCT_FORMATS,
    "date": "i",
    "timestamp": "q",
    "timestamp_ntz": "q",
    "string": "q",
    "void": "q",
}
_MIN_DAY = dt.date(1, 1, 1).toordinal() - dt.date(1970, 1, 1).toordinal()
_MAX_DAY = dt.date(9999, 12, 31).toordinal() - dt.date(1970, 1, 1).toordinal()
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()


_Compiled = Callable[[bytes, int, int], str]


class Fallback(Exception):
    """The row needs the general decoder."""


_days_cache: dict[int, str] = {}


def _day(days: int) -> str:
    text = _days_cache.get(days)
    if text is None:
        if not _MIN_DAY <= days <= _MAX_DAY:
            raise Fallback
        d = dt.date.fromordinal(_EPOCH_ORDINAL + days)
        text = f"{d.year:04d}-{d.month:02d}-{d.day:02d}"
        if len(_days_cache) < 100_000:
            _days_cache[days] = text
    return text


_minutes_cache: dict[int, str] = {}
_MIN_MINUTE = _MIN_DAY * 1440
_MAX_MINUTE = (_MAX_DAY + 1) * 1440 - 1


def _ts(micros: int, suffix: str) -> str:
    seconds, us = divmod(micros, 1_000_000)
    minute, second = divmod(seconds, 60)
    head = _minutes_cache.get(minute)
    if head is None:
        if not _MIN_MINUTE <= minute <= _MAX_MINUTE:
            raise Fallback
        days, rest = divmod(minute, 1440)
        head = f'"{_day(days)}T{rest // 60:02d}:{rest % 60:02d}:'
        if len(_minutes_cache) > 200_000:
            _minutes_cache.clear()
        _minutes_cache[minute] = head
    return f'{head}{second:02d}.{us:06d}{suffix}"'


def _date(days: int) -> str:
    return f'"{_day(days)}"'


def _float_text(value: float) -> str:
    if not math.isfinite(value):
        raise Fallback
    return repr(value)


def _string(buf: bytes, base: int, raw: int, end: int) -> str:
    offset, size = raw >> 32, raw & 0xFFFFFFFF
    start = base + offset
    if offset < 0 or start + size > end:
        raise Fallback
    return str(encode_basestring(buf[start : start + size].decode("utf-8", "replace")))


def _type_name(t: S.DataType) -> str | None:
    if isinstance(t, S.AtomicType):
        return t.name if t.name in _FLAT else None
    if isinstance(t, S.StringLikeType):
        return "string"
    return None


def compile_row(schema: S.StructType) -> Callable[[bytes, int, int], str] | None:
    """``f(buf, base, end) -> JSON object text`` for a row at ``buf[base:end]``, or None when
    a column is not flat."""
    names = schema.unique_names()
    kinds = [_type_name(f.data_type) for f in schema.fields]
    if any(k is None for k in kinds):
        return None
    n = len(kinds)
    words = (n + 63) // 64
    fmt = (
        "<"
        + "q" * words
        + "".join(
            # Every slot is 8 bytes: narrower types sit in its low bytes, padded after.
            f"{_FLAT[k]}{8 - struct.calcsize(_FLAT[k])}x"
            if struct.calcsize(_FLAT[k]) < 8
            else _FLAT[k]
            for k in kinds
            if k is not None
        )
    )
    unpacker = struct.Struct(fmt)
    pieces: list[str] = []  # the f-string's parts: literal text and {expressions}
    for i, (name, kind) in enumerate(zip(names, kinds, strict=True)):
        literal = ("{" if i == 0 else ",") + encode_basestring(name) + ":"
        pieces.append(literal.replace("{", "{{").replace("}", "}}"))
        slot = f"v[{words + i}]"
        null = f"v[{i // 64}] >> {i % 64} & 1"
        if kind == "void":
            value = "'null'"
        elif kind == "boolean":
            value = f"'true' if {slot} else 'false'"
        elif kind in ("byte", "short", "integer", "long"):
            value = slot
        elif kind in ("float", "double"):
            value = f"_float_text({slot})"
        elif kind == "date":
            value = f"_date({slot})"
        elif kind == "timestamp":
            value = f"_ts({slot}, 'Z')"
        elif kind == "timestamp_ntz":
            value = f"_ts({slot}, '')"
        else:  # string
            value = f"_string(buf, base, {slot}, end)"
        pieces.append(f"{{'null' if {null} else {value}}}")
    pieces.append("}}" if n else "{{}}")
    body = "".join(pieces)
    lines = [
        "def encode(buf, base, end):",
        f"    if end - base < {unpacker.size}:",
        "        raise Fallback",
        "    v = unpack_from(buf, base)",
        f'    return f"""{body}"""',
    ]
    namespace: dict[str, Any] = {
        "unpack_from": unpacker.unpack_from,
        "Fallback": Fallback,
        "_float_text": _float_text,
        "_day": _day,
        "_date": _date,
        "_ts": _ts,
        "_string": _string,
    }
    exec("\n".join(lines), namespace)  # noqa: S102 - code generated above from the schema
    encode: Callable[[bytes, int, int], str] = namespace["encode"]
    return encode


class JoinSideDecoder(RowDecoder):
    """Rows as Spark's ``joinSide`` option reads them: a side's ``keyWithIndexToValue`` rows
    without the ``index`` key column and the ``matched`` value column (the joined side's
    input rows by join key)."""

    @functools.cached_property
    def _compiled(self) -> tuple[_Compiled, _Compiled] | None:
        return None  # the generated encoders would keep the dropped columns

    def json_row(self, key: bytes, value: bytes | None) -> tuple[Any, Any]:
        k, v = super().json_row(key, value)
        if isinstance(k, dict):
            k = {name: x for name, x in k.items() if name != "index"}
        if isinstance(v, dict):
            v = {name: x for name, x in v.items() if name != "matched"}
        return k, v


class PrefixScanDecoder(RowDecoder):
    """A RocksDB store whose keys Spark's ``PrefixKeyScanStateEncoder`` wrote (the operator
    metadata's ``numColsPrefixKey`` > 0, e.g. session windows): the prefix columns and the
    rest as two rows, decoded by ``formats/state_encoders``."""

    def __init__(
        self, schema: StateSchema, provider: str, *, prefix_cols: int, path: str = "<state>"
    ) -> None:
        super().__init__(schema, provider, path=path)
        spec = KeyEncoderSpec("PrefixKeyScanStateEncoderSpec", prefix_cols)
        self._prefix_key = make_key_decoder(schema.key, spec, column_families=False, path=path)

    @functools.cached_property
    def _compiled(self) -> tuple[_Compiled, _Compiled] | None:
        return None  # the generated key encoder reads one UnsafeRow

    def key(self, data: bytes) -> Any:
        return self._prefix_key(data).key
