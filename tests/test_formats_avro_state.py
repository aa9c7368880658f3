"""formats/avro_state.py: the Avro schema ckpt derives equals the one Spark 4.3.0 derives
(``SchemaConverters.toAvroTypeWithDefaults``), and decoding bytes never raises anything but
``FormatError``. Real Avro state bytes are compared with Spark's reads in
tests/test_formats_state_encoders.py (``spark4-tws-avro``, ``spark4-tws-row-avro``)."""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckpt_cli.errors import FormatError
from ckpt_cli.formats.avro_state import make_avro_decoder, make_struct_decoder, spark_to_avro_schema
from ckpt_cli.formats.spark_types import NULL, ArrayType, StructField, StructType, parse_struct_json

# Printed by PySpark 4.3.0 (the shared venv) running:
#
#   st = jvm.org.apache.spark.sql.types.StructType.fromDDL(DDL)
#   jvm.org.apache.spark.sql.avro.SchemaConverters.toAvroTypeWithDefaults(st).toString()
#   st.json()
DDL = (
    "a array<bigint>, b array<struct<x:int>>, c map<string,bigint>, d map<string,struct<y:strin"
    "g>>, e decimal(10,2), f date, g timestamp_ntz, h tinyint, i smallint, j float, k binary, l void, m struct<n:struct<o:boolean>>, p timestamp, q array<array<int>>"  # noqa: E501
)
SPARK_SCHEMA_JSON = '{"type":"struct","fields":[{"name":"a","type":{"type":"array","elementType":"long","containsNull":true},"nullable":true,"metadata":{}},{"name":"b","type":{"type":"array","elementType":{"type":"struct","fields":[{"name":"x","type":"integer","nullable":true,"metadata":{}}]},"containsNull":true},"nullable":true,"metadata":{}},{"name":"c","type":{"type":"map","keyType":"string","valueType":"long","valueContainsNull":true},"nullable":true,"metadata":{}},{"name":"d","type":{"type":"map","keyType":"string","valueType":{"type":"struct","fields":[{"name":"y","type":"string","nullable":true,"metadata":{}}]},"valueContainsNull":true},"nullable":true,"metadata":{}},{"name":"e","type":"decimal(10,2)","nullable":true,"metadata":{}},{"name":"f","type":"date","nullable":true,"metadata":{}},{"name":"g","type":"timestamp_ntz","nullable":true,"metadata":{}},{"name":"h","type":"byte","nullable":true,"metadata":{}},{"name":"i","type":"short","nullable":true,"metadata":{}},{"name":"j","type":"float","nullable":true,"metadata":{}},{"name":"k","type":"binary","nullable":true,"metadata":{}},{"name":"l","type":"void","nullable":true,"metadata":{}},{"name":"m","type":{"type":"struct","fields":[{"name":"n","type":{"type":"struct","fields":[{"name":"o","type":"boolean","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},{"name":"p","type":"timestamp","nullable":true,"metadata":{}},{"name":"q","type":{"type":"array","elementType":{"type":"array","elementType":"integer","containsNull":true},"containsNull":true},"nullable":true,"metadata":{}}]}'  # noqa: E501
SPARK_AVRO_JSON = '{"type":"record","name":"topLevelRecord","fields":[{"name":"a","type":["null",{"type":"array","items":"long"}],"default":null},{"name":"b","type":["null",{"type":"array","items":["null",{"type":"record","name":"b","fields":[{"name":"x","type":["null","int"],"default":null}]}]}],"default":null},{"name":"c","type":["null",{"type":"map","values":"long"}],"default":null},{"name":"d","type":["null",{"type":"map","values":["null",{"type":"record","name":"d","fields":[{"name":"y","type":["null","string"],"default":null}]}]}],"default":null},{"name":"e","type":["null",{"type":"fixed","name":"fixed","namespace":"e","size":5,"logicalType":"decimal","precision":10,"scale":2}],"default":null},{"name":"f","type":["null",{"type":"int","logicalType":"date"}],"default":null},{"name":"g","type":["null",{"type":"long","logicalType":"local-timestamp-micros"}],"default":null},{"name":"h","type":["null","int"],"default":null},{"name":"i","type":["null","int"],"default":null},{"name":"j","type":["null","float"],"default":null},{"name":"k","type":["null","bytes"],"default":null},{"name":"l","type":"null","default":null},{"name":"m","type":["null",{"type":"record","name":"m","fields":[{"name":"n","type":["null",{"type":"record","name":"n","fields":[{"name":"o","type":["null","boolean"],"default":null}]}],"default":null}]}],"default":null},{"name":"p","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null},{"name":"q","type":["null",{"type":"array","items":["null",{"type":"array","items":"int"}]}],"default":null}]}'  # noqa: E501


def _shape(x: Any) -> Any:
    """An Avro schema without its names (they do not change the binary form)."""
    if isinstance(x, dict):
        return {k: _shape(v) for k, v in x.items() if k not in ("name", "namespace")}
    if isinstance(x, list):
        return [_shape(v) for v in x]
    return x


def test_derived_schema_equals_spark_4_3() -> None:
    ours = spark_to_avro_schema(parse_struct_json("schema", SPARK_SCHEMA_JSON))
    assert _shape(ours) == _shape(json.loads(SPARK_AVRO_JSON))


def test_values_written_with_sparks_schema_decode() -> None:
    spark = fastavro.parse_schema(json.loads(SPARK_AVRO_JSON))
    record = {
        "a": [1, -2],
        "b": [{"x": 3}, None],
        "c": {"k": 4},
        "d": {"k": {"y": "z"}},
        "m": {"n": {"o": True}},
        "h": -1,
        "q": [[1], [2, 3]],
    }
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, spark, record)
    decoded = make_struct_decoder(parse_struct_json("s", SPARK_SCHEMA_JSON))(buf.getvalue())
    assert {k: v for k, v in decoded.items() if v is not None} == record


def test_zero_width_array_elements_are_refused() -> None:
    with pytest.raises(FormatError):
        make_struct_decoder(StructType((StructField("a", ArrayType(NULL)),)))


_DECODER = make_struct_decoder(parse_struct_json("s", SPARK_SCHEMA_JSON))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_give_a_value_or_a_format_error(data: bytes) -> None:
    with contextlib.suppress(FormatError):
        _DECODER(data)


def test_truncated_data_is_a_format_error() -> None:
    decode = make_avro_decoder(
        {"type": "record", "name": "r", "fields": [{"name": "s", "type": "string"}]}
    )
    with pytest.raises(FormatError, match="bad Avro data"):
        decode(b"\xfe\xff\xff\xff\x0f")
