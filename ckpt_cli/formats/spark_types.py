"""Spark SQL's data types, as a schema's JSON names them (``StructType.json``): frozen
dataclasses, and ``parse_struct_json`` from that JSON. The state schema files that store them
are ``formats/state_schema``."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ckpt_cli.errors import (
    FormatError,
)

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
# Python ``struct``'s letter for a value of each fixed-width primitive type (the byte order is
# the format's: little-endian in an UnsafeRow, big-endian in a range-scan key).
STRUCT_FORMATS = {
    "boolean": "?",
    "byte": "b",
    "short": "h",
    "integer": "i",
    "long": "q",
    "float": "f",
    "double": "d",
}
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
class _IntervalType:
    """An ANSI interval type: ``start_field`` and ``end_field`` index its ``FIELD_NAMES``."""

    FIELD_NAMES: ClassVar[tuple[str, ...]]

    start_field: int
    end_field: int

    def simple_string(self) -> str:
        return _interval_name(self.FIELD_NAMES, self.start_field, self.end_field)


@dataclass(frozen=True)
class YearMonthIntervalType(_IntervalType):
    """``interval year to month`` etc.: an int32 count of months."""

    FIELD_NAMES = YEAR_MONTH_FIELDS
    start_field: int = 0
    end_field: int = 1


@dataclass(frozen=True)
class DayTimeIntervalType(_IntervalType):
    """``interval day to second`` etc.: an int64 count of microseconds."""

    FIELD_NAMES = DAY_TIME_FIELDS
    start_field: int = 0
    end_field: int = 3


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


class TypeJsonError(Exception):
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
            raise TypeJsonError(f"invalid decimal precision/scale in {name!r}")
        return DecimalType(precision, scale)
    if _CHAR_RE.fullmatch(name) or name.startswith("string collate "):
        return StringLikeType(name)
    m = _TIME_RE.fullmatch(name)
    if m:
        return TimeType(int(m.group(1)))
    m = _INTERVAL_RE.fullmatch(name)
    if m:
        start, end = m.group(1), m.group(2) or m.group(1)
        for cls in (YearMonthIntervalType, DayTimeIntervalType):
            names = cls.FIELD_NAMES
            if start in names and end in names:
                s, e = names.index(start), names.index(end)
                if s > e:
                    raise TypeJsonError(f"invalid interval type {name!r}")
                return cls(s, e)
        raise TypeJsonError(f"invalid interval type {name!r}")
    return UnknownType(json.dumps(name))


def _require(obj: Mapping[str, Any], key: str, kind: type, what: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeJsonError(f"{what}: {key!r} must be a {kind.__name__}, found {value!r}")
    return value


def parse_type_json(obj: Any, depth: int = 0) -> DataType:
    if depth > 200:
        raise TypeJsonError("data type nested too deeply")
    if isinstance(obj, str):
        return _parse_type_name(obj)
    if not isinstance(obj, dict):
        raise TypeJsonError(f"a data type must be a string or object, found {type(obj).__name__}")
    kind = obj.get("type")
    if kind == "struct":
        return _parse_struct(obj, depth)
    if kind == "array":
        element = parse_type_json(obj.get("elementType"), depth + 1)
        return ArrayType(element, bool(obj.get("containsNull", True)))
    if kind == "map":
        key = parse_type_json(obj.get("keyType"), depth + 1)
        value = parse_type_json(obj.get("valueType"), depth + 1)
        return MapType(key, value, bool(obj.get("valueContainsNull", True)))
    if kind == "udt":
        name = obj.get("class") or obj.get("pyClass") or "?"
        return UserDefinedType(str(name), parse_type_json(obj.get("sqlType"), depth + 1))
    return UnknownType(json.dumps(obj, sort_keys=True))


def _parse_struct(obj: Mapping[str, Any], depth: int) -> StructType:
    raw_fields = obj.get("fields")
    if not isinstance(raw_fields, list):
        raise TypeJsonError("a struct type needs a 'fields' list")
    fields: list[StructField] = []
    for index, raw in enumerate(raw_fields):
        if not isinstance(raw, dict):
            raise TypeJsonError(f"struct field {index} must be an object")
        name = _require(raw, "name", str, f"struct field {index}")
        if "type" not in raw:
            raise TypeJsonError(f"struct field {name!r} has no 'type'")
        metadata = raw.get("metadata", {})
        if not isinstance(metadata, dict):
            raise TypeJsonError(f"struct field {name!r}: metadata must be an object")
        fields.append(
            StructField(
                name,
                parse_type_json(raw["type"], depth + 1),
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
    except TypeJsonError as exc:
        raise FormatError(path, f"invalid Spark schema: {exc}", offset=offset) from None
