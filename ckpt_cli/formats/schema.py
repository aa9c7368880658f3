"""Spark SQL data types and the state schema files that store them.

* ``parse_struct_json``: Spark's ``StructType.json`` into frozen dataclasses.
* ``parse_state_schema``: ``state/<op>/0[/<store>]/_metadata/schema`` (versions 1 and 2) and
  the 4.x ``state/<op>/_stateSchema/<store>/<batch>_<uuid>`` files (version 3).

Binary framing follows Java ``DataOutputStream`` (docs/spark-checkpoint-format.md §8.1):

* v1: ``writeUTF("v1") writeUTF(keyJson) writeUTF(valueJson)``
* v2: ``writeUTF("v2")``, then key and value JSON each as ``int32 BE n`` + ``n x writeUTF``
* v3 (Spark 4.x ``SchemaV3Writer``, read from the 4.3.0 bytecode and checked against a file
  written by 4.3.0): ``writeUTF("v3") int32 BE numColumnFamilies``, then per column family
  ``writeUTF(name) int16 keySchemaId <json key> int16 valueSchemaId <json value>
  <json keyStateEncoderSpec> <json userKeyEncoderSchema or "{    }">``, where ``<json>``
  is the v2 chunked form.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ckpt_cli.errors import (
    FormatError,
    TruncatedFileError,
    UnsupportedVersionError,
    unsupported_hint,
)

MAX_SCHEMA_VERSION = 3
DEFAULT_COLUMN_FAMILY = "default"

# -- data types ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AtomicType:
    """A type without parameters, named as in Spark's JSON (``"long"``, ``"void"``, ...)."""

    name: str

    def simple_string(self) -> str:
        return _SIMPLE_NAMES.get(self.name, self.name)


BOOLEAN = AtomicType("boolean")
BYTE = AtomicType("byte")
SHORT = AtomicType("short")
INTEGER = AtomicType("integer")
LONG = AtomicType("long")
FLOAT = AtomicType("float")
DOUBLE = AtomicType("double")
STRING = AtomicType("string")
BINARY = AtomicType("binary")
DATE = AtomicType("date")
TIMESTAMP = AtomicType("timestamp")
TIMESTAMP_NTZ = AtomicType("timestamp_ntz")
NULL = AtomicType("void")
CALENDAR_INTERVAL = AtomicType("interval")
VARIANT = AtomicType("variant")

_ATOMIC_BY_JSON: dict[str, AtomicType] = {
    t.name: t
    for t in (
        BOOLEAN,
        BYTE,
        SHORT,
        INTEGER,
        LONG,
        FLOAT,
        DOUBLE,
        STRING,
        BINARY,
        DATE,
        TIMESTAMP,
        TIMESTAMP_NTZ,
        NULL,
        CALENDAR_INTERVAL,
        VARIANT,
    )
}
# Older Sparks wrote NullType as "null"; "calendarinterval" is CalendarIntervalType's JSON name.
_ATOMIC_BY_JSON["null"] = NULL
_ATOMIC_BY_JSON["calendarinterval"] = CALENDAR_INTERVAL
_SIMPLE_NAMES = {
    "byte": "tinyint",
    "short": "smallint",
    "integer": "int",
    "long": "bigint",
    "interval": "interval",
}


@dataclass(frozen=True)
class DecimalType:
    precision: int = 10
    scale: int = 0

    def simple_string(self) -> str:
        return f"decimal({self.precision},{self.scale})"


@dataclass(frozen=True)
class StringLikeType:
    """``char(n)``, ``varchar(n)`` or a collated string: stored exactly like ``string``."""

    json_name: str

    def simple_string(self) -> str:
        return self.json_name


YEAR_MONTH_FIELDS = ("year", "month")
DAY_TIME_FIELDS = ("day", "hour", "minute", "second")


@dataclass(frozen=True)
class YearMonthIntervalType:
    """``interval year to month`` etc.: an int32 count of months."""

    start_field: int = 0
    end_field: int = 1

    def simple_string(self) -> str:
        return _interval_name(YEAR_MONTH_FIELDS, self.start_field, self.end_field)


@dataclass(frozen=True)
class DayTimeIntervalType:
    """``interval day to second`` etc.: an int64 count of microseconds."""

    start_field: int = 0
    end_field: int = 3

    def simple_string(self) -> str:
        return _interval_name(DAY_TIME_FIELDS, self.start_field, self.end_field)


@dataclass(frozen=True)
class TimeType:
    """``time(p)`` (Spark 4.1+): an int64 count of nanoseconds since midnight."""

    precision: int = 6

    def simple_string(self) -> str:
        return f"time({self.precision})"


@dataclass(frozen=True)
class ArrayType:
    element_type: DataType
    contains_null: bool = True

    def simple_string(self) -> str:
        return f"array<{self.element_type.simple_string()}>"


@dataclass(frozen=True)
class MapType:
    key_type: DataType
    value_type: DataType
    value_contains_null: bool = True

    def simple_string(self) -> str:
        return f"map<{self.key_type.simple_string()},{self.value_type.simple_string()}>"


@dataclass(frozen=True)
class StructField:
    name: str
    data_type: DataType
    nullable: bool = True
    # Spark's field metadata (e.g. spark.watermarkDelayMs), as JSON text so the class stays
    # hashable.
    metadata_json: str = "{}"

    @property
    def metadata(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.metadata_json)
        return value


@dataclass(frozen=True)
class StructType:
    fields: tuple[StructField, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def unique_names(self) -> tuple[str, ...]:
        """Field names made unique: a repeated name gets ``#<ordinal>`` appended.

        Aggregation buffers repeat names (``max(a), max(b)`` both store ``max``), and decoded
        rows are dicts keyed by these.
        """
        seen: set[str] = set()
        out: list[str] = []
        for index, f in enumerate(self.fields):
            name = f.name
            if name in seen:
                name = f"{name}#{index}"
                while name in seen:
                    name += "_"
            seen.add(name)
            out.append(name)
        return tuple(out)

    def simple_string(self) -> str:
        inner = ",".join(f"{f.name}:{f.data_type.simple_string()}" for f in self.fields)
        return f"struct<{inner}>"


@dataclass(frozen=True)
class UserDefinedType:
    """A UDT: stored as its ``sql_type``."""

    class_name: str
    sql_type: DataType

    def simple_string(self) -> str:
        return self.sql_type.simple_string()


@dataclass(frozen=True)
class UnknownType:
    """A type this version of ckpt does not know (kept so the rest of a schema still parses)."""

    json_text: str

    def simple_string(self) -> str:
        return f"unknown<{self.json_text}>"


DataType = (
    AtomicType
    | DecimalType
    | StringLikeType
    | YearMonthIntervalType
    | DayTimeIntervalType
    | TimeType
    | ArrayType
    | MapType
    | StructType
    | UserDefinedType
    | UnknownType
)


def _interval_name(names: tuple[str, ...], start: int, end: int) -> str:
    def name(i: int) -> str:
        return names[i] if 0 <= i < len(names) else str(i)

    if start == end:
        return f"interval {name(start)}"
    return f"interval {name(start)} to {name(end)}"


_DECIMAL_RE = re.compile(r"decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)")
_CHAR_RE = re.compile(r"(?:char|varchar)\(\s*\d+\s*\)")
_TIME_RE = re.compile(r"time\(\s*(\d+)\s*\)")
_INTERVAL_RE = re.compile(r"interval (\w+)(?: to (\w+))?")


class _TypeError(Exception):
    """Raised inside the type parser; turned into FormatError with the file path."""


def _parse_type_name(name: str) -> DataType:
    atomic = _ATOMIC_BY_JSON.get(name)
    if atomic is not None:
        return atomic
    if name == "decimal":
        return DecimalType()
    m = _DECIMAL_RE.fullmatch(name)
    if m:
        precision, scale = int(m.group(1)), int(m.group(2))
        if not 0 < precision <= 38 or not 0 <= scale <= precision:
            raise _TypeError(f"invalid decimal precision/scale in {name!r}")
        return DecimalType(precision, scale)
    if _CHAR_RE.fullmatch(name) or name.startswith("string collate "):
        return StringLikeType(name)
    m = _TIME_RE.fullmatch(name)
    if m:
        return TimeType(int(m.group(1)))
    m = _INTERVAL_RE.fullmatch(name)
    if m:
        start, end = m.group(1), m.group(2) or m.group(1)
        for names, cls in (
            (YEAR_MONTH_FIELDS, YearMonthIntervalType),
            (DAY_TIME_FIELDS, DayTimeIntervalType),
        ):
            if start in names and end in names:
                s, e = names.index(start), names.index(end)
                if s > e:
                    raise _TypeError(f"invalid interval type {name!r}")
                return cls(s, e)
        raise _TypeError(f"invalid interval type {name!r}")
    return UnknownType(json.dumps(name))


def _require(obj: Mapping[str, Any], key: str, kind: type, what: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _TypeError(f"{what}: {key!r} must be a {kind.__name__}, found {value!r}")
    return value


def _parse_type(obj: Any, depth: int = 0) -> DataType:
    if depth > 200:
        raise _TypeError("data type nested too deeply")
    if isinstance(obj, str):
        return _parse_type_name(obj)
    if not isinstance(obj, dict):
        raise _TypeError(f"a data type must be a string or object, found {type(obj).__name__}")
    kind = obj.get("type")
    if kind == "struct":
        return _parse_struct(obj, depth)
    if kind == "array":
        element = _parse_type(obj.get("elementType"), depth + 1)
        return ArrayType(element, bool(obj.get("containsNull", True)))
    if kind == "map":
        key = _parse_type(obj.get("keyType"), depth + 1)
        value = _parse_type(obj.get("valueType"), depth + 1)
        return MapType(key, value, bool(obj.get("valueContainsNull", True)))
    if kind == "udt":
        name = obj.get("class") or obj.get("pyClass") or "?"
        return UserDefinedType(str(name), _parse_type(obj.get("sqlType"), depth + 1))
    return UnknownType(json.dumps(obj, sort_keys=True))


def _parse_struct(obj: Mapping[str, Any], depth: int) -> StructType:
    raw_fields = obj.get("fields")
    if not isinstance(raw_fields, list):
        raise _TypeError("a struct type needs a 'fields' list")
    fields: list[StructField] = []
    for index, raw in enumerate(raw_fields):
        if not isinstance(raw, dict):
            raise _TypeError(f"struct field {index} must be an object")
        name = _require(raw, "name", str, f"struct field {index}")
        if "type" not in raw:
            raise _TypeError(f"struct field {name!r} has no 'type'")
        metadata = raw.get("metadata", {})
        if not isinstance(metadata, dict):
            raise _TypeError(f"struct field {name!r}: metadata must be an object")
        fields.append(
            StructField(
                name,
                _parse_type(raw["type"], depth + 1),
                bool(raw.get("nullable", True)),
                json.dumps(metadata, sort_keys=True),
            )
        )
    return StructType(tuple(fields))


def parse_struct_json(path: str, text: str, *, offset: int | None = None) -> StructType:
    """Spark ``StructType.json`` text to a StructType."""
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise FormatError(path, f"schema is not valid JSON: {exc}", offset=offset) from None
    if not isinstance(obj, dict) or obj.get("type") != "struct":
        raise FormatError(path, "schema JSON is not a struct type", offset=offset)
    try:
        return _parse_struct(obj, 0)
    except _TypeError as exc:
        raise FormatError(path, f"invalid Spark schema: {exc}", offset=offset) from None


# -- Java DataInputStream ------------------------------------------------------------------


def decode_modified_utf8(data: bytes) -> list[int] | str:
    """Java modified UTF-8 to UTF-16 code units (or a str when the bytes are ASCII).

    Code units rather than a str: v2/v3 split long JSON into chunks on *chars*, so a
    surrogate pair can straddle two chunks and must be joined before decoding.
    Raises ValueError on malformed input (Java's UTFDataFormatException).
    """
    if data.isascii():
        return data.decode("ascii")
    units: list[int] = []
    i, n = 0, len(data)
    while i < n:
        c = data[i]
        if c < 0x80:
            units.append(c)
            i += 1
        elif c >> 5 == 0b110:
            if i + 1 >= n or data[i + 1] >> 6 != 0b10:
                raise ValueError(f"malformed 2-byte sequence at {i}")
            units.append(((c & 0x1F) << 6) | (data[i + 1] & 0x3F))
            i += 2
        elif c >> 4 == 0b1110:
            if i + 2 >= n or data[i + 1] >> 6 != 0b10 or data[i + 2] >> 6 != 0b10:
                raise ValueError(f"malformed 3-byte sequence at {i}")
            units.append(((c & 0x0F) << 12) | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F))
            i += 3
        else:
            raise ValueError(f"byte 0x{c:02x} at {i} cannot start a modified UTF-8 char")
    return units


def _units_to_str(parts: list[list[int] | str]) -> str:
    if all(isinstance(p, str) for p in parts):
        return "".join(p for p in parts if isinstance(p, str))
    units: list[int] = []
    for p in parts:
        if isinstance(p, str):
            units.extend(ord(ch) for ch in p)
        else:
            units.extend(p)
    raw = struct.pack(f"<{len(units)}H", *units)
    # surrogatepass keeps a lone surrogate (Java strings may hold one) instead of failing.
    return raw.decode("utf-16-le", "surrogatepass")


class _Reader:
    """A bounds-checked Java DataInputStream over bytes."""

    def __init__(self, path: str, data: bytes) -> None:
        self.path = path
        self.data = data
        self.pos = 0

    def _take(self, n: int, what: str) -> bytes:
        if self.pos + n > len(self.data):
            raise TruncatedFileError(
                self.path,
                f"file ends inside {what} (needs {n} bytes, {len(self.data) - self.pos} left)",
                offset=self.pos,
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def read_int(self, what: str) -> int:
        value: int = struct.unpack(">i", self._take(4, what))[0]
        return value

    def read_short(self, what: str) -> int:
        value: int = struct.unpack(">h", self._take(2, what))[0]
        return value

    def read_utf_units(self, what: str) -> list[int] | str:
        start = self.pos
        (length,) = struct.unpack(">H", self._take(2, what))
        raw = self._take(length, what)
        try:
            return decode_modified_utf8(raw)
        except ValueError as exc:
            raise FormatError(
                self.path, f"{what} is not modified UTF-8: {exc}", offset=start
            ) from None

    def read_utf(self, what: str) -> str:
        start = self.pos
        units = self.read_utf_units(what)
        return self._finish([units], what, start)

    def read_chunked(self, what: str) -> tuple[str, int]:
        """v2/v3 ``int32 n`` + ``n x writeUTF``; returns the text and where it started."""
        start = self.pos
        count = self.read_int(f"the chunk count of {what}")
        # Each chunk takes at least 2 bytes, so a count beyond that is corrupt (and would
        # otherwise loop for a long time on garbage).
        if count < 0 or count * 2 > len(self.data) - self.pos:
            raise FormatError(self.path, f"invalid chunk count {count} for {what}", offset=start)
        parts = [self.read_utf_units(f"{what} (chunk {i + 1} of {count})") for i in range(count)]
        return self._finish(parts, what, start), start

    def _finish(self, parts: list[list[int] | str], what: str, start: int) -> str:
        try:
            return _units_to_str(parts)
        except UnicodeDecodeError as exc:
            raise FormatError(self.path, f"{what}: bad text ({exc.reason})", offset=start) from None


# -- state schema files --------------------------------------------------------------------


@dataclass(frozen=True)
class KeyEncoderSpec:
    """How a column family's key is laid out in RocksDB (schema v3 ``keyStateEncoderSpec``).

    ``kind`` is Spark's class name: ``NoPrefixKeyStateEncoderSpec``,
    ``PrefixKeyScanStateEncoderSpec`` (``num_cols_prefix_key``), ``RangeKeyScanStateEncoderSpec``
    (``ordering_ordinals``), ``TimestampAsPrefixKeyStateEncoderSpec``,
    ``TimestampAsPostfixKeyStateEncoderSpec``.
    """

    kind: str
    num_cols_prefix_key: int = 0
    ordering_ordinals: tuple[int, ...] = ()
    raw_json: str = "{}"


NO_PREFIX = KeyEncoderSpec("NoPrefixKeyStateEncoderSpec", raw_json="{}")


@dataclass(frozen=True)
class ColumnFamilySchema:
    name: str
    key: StructType
    value: StructType
    key_schema_id: int = 0
    value_schema_id: int = 0
    key_encoder: KeyEncoderSpec = NO_PREFIX
    # transformWithState MapState: the user key's type; None when absent.
    user_key_encoder_schema: DataType | None = None


@dataclass(frozen=True)
class StateSchema:
    """A parsed schema file.

    ``key``/``value`` are those of the ``default`` column family (v1/v2: the only one; v3: the
    ``default`` entry when present, else the first listed).
    """

    key: StructType
    value: StructType
    version: int
    column_families: tuple[ColumnFamilySchema, ...] = field(default=())
    # Bytes after the last schema (Spark ignores them; non-zero suggests corruption).
    trailing_bytes: int = 0

    def column_family(self, name: str) -> ColumnFamilySchema | None:
        return next((cf for cf in self.column_families if cf.name == name), None)


def _parse_encoder_spec(path: str, text: str, offset: int) -> KeyEncoderSpec:
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise FormatError(path, f"key encoder spec is not JSON: {exc}", offset=offset) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("keyStateEncoderType"), str):
        raise FormatError(path, "key encoder spec has no keyStateEncoderType string", offset=offset)
    prefix = obj.get("numColsPrefixKey", 0)
    ordinals = obj.get("orderingOrdinals", [])
    if isinstance(prefix, bool) or not isinstance(prefix, int) or prefix < 0:
        raise FormatError(path, f"invalid numColsPrefixKey {prefix!r}", offset=offset)
    if not isinstance(ordinals, list) or not all(
        isinstance(o, int) and not isinstance(o, bool) for o in ordinals
    ):
        raise FormatError(path, f"invalid orderingOrdinals {ordinals!r}", offset=offset)
    return KeyEncoderSpec(
        obj["keyStateEncoderType"], prefix, tuple(ordinals), json.dumps(obj, sort_keys=True)
    )


def _parse_user_key_schema(path: str, text: str, offset: int) -> DataType | None:
    # Spark writes "{    }" when absent and reads it back with Try(...).toOption.
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    if obj == {}:
        return None
    try:
        return _parse_type(obj)
    except _TypeError:
        return None


def parse_state_schema(path: str, data: bytes) -> StateSchema:
    """A ``_metadata/schema`` (v1/v2) or ``_stateSchema/...`` (v3) file."""
    reader = _Reader(path, bytes(data))
    if not data:
        raise FormatError(path, "empty schema file")
    header = reader.read_utf("the version header")
    if len(header) < 2 or header[0] != "v" or not header[1:].isdigit():
        raise FormatError(
            path, f"expected a version header like 'v2', found {header[:20]!r}", offset=0
        )
    version = int(header[1:])
    if version < 1 or version > MAX_SCHEMA_VERSION:
        raise UnsupportedVersionError(
            path,
            f"state schema version v{version} is unsupported (ckpt reads v1-v{MAX_SCHEMA_VERSION})",
            offset=0,
            hint=unsupported_hint(),
        )
    families: list[ColumnFamilySchema] = []
    if version == 1:
        key_at = reader.pos
        key = parse_struct_json(path, reader.read_utf("the key schema"), offset=key_at)
        value_at = reader.pos
        value = parse_struct_json(path, reader.read_utf("the value schema"), offset=value_at)
        families.append(ColumnFamilySchema(DEFAULT_COLUMN_FAMILY, key, value))
    elif version == 2:
        text, at = reader.read_chunked("the key schema")
        key = parse_struct_json(path, text, offset=at)
        text, at = reader.read_chunked("the value schema")
        value = parse_struct_json(path, text, offset=at)
        families.append(ColumnFamilySchema(DEFAULT_COLUMN_FAMILY, key, value))
    else:
        start = reader.pos
        count = reader.read_int("the column family count")
        if count < 0 or count * 16 > len(data) - reader.pos:
            raise FormatError(path, f"invalid column family count {count}", offset=start)
        for i in range(count):
            what = f"column family {i + 1} of {count}"
            name = reader.read_utf(f"the name of {what}")
            key_id = reader.read_short(f"the key schema id of {what}")
            text, at = reader.read_chunked(f"the key schema of {what}")
            key = parse_struct_json(path, text, offset=at)
            value_id = reader.read_short(f"the value schema id of {what}")
            text, at = reader.read_chunked(f"the value schema of {what}")
            value = parse_struct_json(path, text, offset=at)
            text, at = reader.read_chunked(f"the key encoder spec of {what}")
            spec = _parse_encoder_spec(path, text, at)
            text, at = reader.read_chunked(f"the user key schema of {what}")
            user_key = _parse_user_key_schema(path, text, at)
            families.append(ColumnFamilySchema(name, key, value, key_id, value_id, spec, user_key))
    # Spark ignores bytes after the schema, so they are reported, not rejected.
    trailing = len(reader.data) - reader.pos
    if not families:
        return StateSchema(StructType(), StructType(), version, (), trailing)
    main = next((cf for cf in families if cf.name == DEFAULT_COLUMN_FAMILY), families[0])
    return StateSchema(main.key, main.value, version, tuple(families), trailing)
