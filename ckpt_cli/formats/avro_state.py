"""Avro-encoded RocksDB state (``spark.sql.streaming.stateStore.encodingFormat=avro``).

Spark 4.x's ``AvroStateEncoder`` (RocksDBStateEncoder.scala) writes each key part and value
as Avro binary (no container, no schema in the data) with the schema Spark derives from the
Spark schema of the state schema file: ``SchemaConverters.toAvroTypeWithDefaults``
(connector/avro ``SchemaConverters.scala``). Every field of a record, nullable or not, is a
union ``["null", T]`` with default null (a present value starts with the union index 1,
zigzag ``02``); ``void`` fields are Avro ``null`` (no bytes); array elements and map
values are unions only when they are structs, arrays or maps. docs/state-formats.md §11.

This module derives that Avro schema and decodes with ``fastavro`` (no hand-written Avro).
The framing around the Avro bytes (version byte, 2-byte schema id, column family prefix) is
``state_encoders``' business. Decoded values follow ``unsaferow``'s Python conventions
(``datetime`` for timestamps, ``Decimal`` for decimals, dicts for structs).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from ckpt_cli.errors import FormatError
from ckpt_cli.formats import spark_types as S

TOP_LEVEL_RECORD = "topLevelRecord"

_ATOMIC: dict[str, Any] = {
    "boolean": "boolean",
    "byte": "int",
    "short": "int",
    "integer": "int",
    "long": "long",
    "float": "float",
    "double": "double",
    "string": "string",
    "binary": "bytes",
    "date": {"type": "int", "logicalType": "date"},
    "timestamp": {"type": "long", "logicalType": "timestamp-micros"},
    "timestamp_ntz": {"type": "long", "logicalType": "local-timestamp-micros"},
    "void": "null",
}


def _min_bytes_for_precision(precision: int) -> int:
    # Spark's Decimal.minBytesForPrecision: the smallest n with 2^(8n-1) >= 10^precision.
    n = 1
    while 2 ** (8 * n - 1) < 10**precision:
        n += 1
    return n


def _avro_type(data_type: S.DataType, record_name: str, namespace: str, level: int) -> Any:
    """``SchemaConverters.toAvroTypeWithDefaults`` (Spark 4.x, connector/avro): structs below
    the top level, arrays and maps are ``["null", T]`` unions; a struct's fields are unions
    too (void stays ``null``); array elements and map values of other types are not (their
    ``containsNull`` is ignored). Nested records are named after their field; ckpt puts each
    in its parent's namespace so that equal field names never clash (names do not change
    the binary form)."""
    if level > 100:
        raise ValueError("schema nested too deeply")
    while isinstance(data_type, S.UserDefinedType):
        data_type = data_type.sql_type
    if isinstance(data_type, S.StructType):
        child_ns = f"{namespace}.{record_name}" if namespace else record_name
        fields = []
        for f in data_type.fields:
            inner = _avro_type(f.data_type, f.name, child_ns, level + 1)
            if inner != "null" and not isinstance(inner, list):
                inner = ["null", inner]
            fields.append({"name": f.name, "type": inner, "default": None})
        record: dict[str, Any] = {"type": "record", "name": record_name, "fields": fields}
        if namespace:
            record["namespace"] = namespace
        return ["null", record] if level > 0 else record
    if isinstance(data_type, S.ArrayType):
        items = _avro_type(data_type.element_type, record_name, namespace, level + 1)
        if _zero_width(items):
            # A block count of 2^62 such items would read no bytes and never end.
            raise ValueError(f"{data_type.simple_string()}: elements of no bytes in Avro")
        return ["null", {"type": "array", "items": items}]
    if isinstance(data_type, S.MapType):
        key_type = data_type.key_type
        if not isinstance(key_type, S.StringLikeType) and key_type != S.AtomicType("string"):
            raise ValueError(f"Avro maps need string keys, found {data_type.simple_string()}")
        values = _avro_type(data_type.value_type, record_name, namespace, level + 1)
        return ["null", {"type": "map", "values": values}]
    if isinstance(data_type, S.DecimalType):
        name = f"{namespace}.{record_name}.fixed" if namespace else f"{record_name}.fixed"
        return {
            "type": "fixed",
            "name": name,
            "size": _min_bytes_for_precision(data_type.precision),
            "logicalType": "decimal",
            "precision": data_type.precision,
            "scale": data_type.scale,
        }
    if isinstance(data_type, S.StringLikeType):
        return "string"
    # Intervals: Spark 4.x's toAvroType form (int months / long microseconds); not seen in
    # any state fixture.
    if isinstance(data_type, S.YearMonthIntervalType):
        return "int"
    if isinstance(data_type, S.DayTimeIntervalType):
        return "long"
    if isinstance(data_type, S.AtomicType) and data_type.name in _ATOMIC:
        return _ATOMIC[data_type.name]
    raise ValueError(f"Spark type {data_type.simple_string()} has no Avro form")


def _zero_width(avro: Any) -> bool:
    """Whether a value of this Avro type can take no bytes (null, or records of such)."""
    if avro == "null":
        return True
    if isinstance(avro, list):
        return False  # a union's branch index takes a byte
    if isinstance(avro, dict) and avro.get("type") == "record":
        return all(_zero_width(f["type"]) for f in avro["fields"])
    return False


def spark_to_avro_schema(schema: S.StructType, *, record_name: str = TOP_LEVEL_RECORD) -> Any:
    """The Avro schema (JSON-like) ``SchemaConverters.toAvroTypeWithDefaults(schema)`` gives:
    a record named ``topLevelRecord``, every field ``["null", T]`` with default null."""
    return _avro_type(schema, record_name, "", 0)


def range_scan_avro_schema(ordering_fields: S.StructType) -> Any:
    """The Avro record of a range-scan key prefix: per ordering column a marker and a value
    field, both ``["null", "bytes"]`` (``StateStoreColumnFamilySchemaUtils.convertForRangeScan``
    then ``toAvroTypeWithDefaults``)."""
    fields = []
    for i, f in enumerate(ordering_fields.fields):
        for part in ("marker", "value"):
            fields.append({"name": f"{part}_{i}_{_safe(f.name)}", "type": ["null", "bytes"]})
    return {"type": "record", "name": TOP_LEVEL_RECORD, "fields": fields}


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)


AvroDecoder = Callable[[bytes], Any]


def make_avro_decoder(
    writer_schema: Any,
    *,
    path: str = "<avro>",
    reader_schema: Any | None = None,
) -> AvroDecoder:
    """Compile an Avro schema once into ``decode(data) -> value`` (a dict for a record).

    ``reader_schema``, when given, resolves the data written with ``writer_schema`` to it
    (Spark's schema evolution reads with ``GenericDatumReader(writer, reader)``). Bytes that do
    not fit raise ``FormatError``; trailing bytes are ignored, as Spark's binary decoder does.
    """
    import fastavro  # only Avro-encoded state needs it (~9 MB resident)

    try:
        writer = fastavro.parse_schema(writer_schema)
        reader = fastavro.parse_schema(reader_schema) if reader_schema is not None else None
    except Exception as exc:  # fastavro raises SchemaParseException and plain errors
        raise FormatError(path, f"cannot build the Avro schema: {exc}") from None

    def decode(data: bytes) -> Any:
        buf = io.BytesIO(bytes(data))
        try:
            if reader is None:
                return fastavro.schemaless_reader(buf, writer)
            return fastavro.schemaless_reader(buf, writer, reader)
        except Exception as exc:  # EOFError, ValueError, IndexError, OverflowError, ...
            raise FormatError(
                path, f"bad Avro data: {type(exc).__name__}: {exc}", offset=buf.tell()
            ) from None

    return decode


def make_struct_decoder(
    schema: S.StructType, *, path: str = "<avro>", writer: S.StructType | None = None
) -> AvroDecoder:
    """``decode(avro bytes) -> dict`` for rows of ``schema`` (the Spark schema), written with
    ``writer`` (an older schema of the same column family) or ``schema`` itself."""
    try:
        reader_avro = spark_to_avro_schema(schema)
        writer_avro = spark_to_avro_schema(writer) if writer is not None else None
    except ValueError as exc:
        raise FormatError(path, str(exc)) from None
    if writer_avro is None or writer_avro == reader_avro:
        return make_avro_decoder(reader_avro, path=path)
    return make_avro_decoder(writer_avro, path=path, reader_schema=reader_avro)
