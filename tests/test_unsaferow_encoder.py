"""``unsaferow.flat_row_encoder``: the UnsafeRow of a flat row (booleans, integers,
strings, nulls) as Spark writes it, checked by the decoder on random rows, and on every key
of the fixtures whose key schema it encodes (the stored bytes, after the store's prefix)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckpt_cli
from ckpt_cli.core.read import iter_state
from ckpt_cli.core.rebuild import plan_version
from ckpt_cli.formats import spark_types as S
from ckpt_cli.formats.unsaferow import flat_row_encoder, make_decoder
from ckpt_cli.state.reader import decoder_for
from tests.conftest import CASES, CASES_DIR

TYPES = {
    "boolean": st.booleans(),
    "byte": st.integers(-(2**7), 2**7 - 1),
    "short": st.integers(-(2**15), 2**15 - 1),
    "integer": st.integers(-(2**31), 2**31 - 1),
    "long": st.integers(-(2**63), 2**63 - 1),
    "string": st.text(max_size=40),
}


@st.composite
def schemas_and_rows(draw: Any) -> tuple[S.StructType, dict[str, Any]]:
    names = draw(st.lists(st.sampled_from(sorted(TYPES)), min_size=1, max_size=70))
    schema = S.StructType(
        tuple(S.StructField(f"c{i}", S.AtomicType(t), True) for i, t in enumerate(names))
    )
    row = {f"c{i}": draw(st.none() | TYPES[t]) for i, t in enumerate(names)}
    return schema, row


@settings(max_examples=300, deadline=None)
@given(schemas_and_rows())
def test_a_row_decodes_to_itself(case: tuple[S.StructType, dict[str, Any]]) -> None:
    schema, row = case
    encode = flat_row_encoder(schema)
    assert encode is not None
    data = encode(row)
    assert data is not None
    assert make_decoder(schema)(data) == row


@pytest.mark.parametrize(
    ("row", "why"),
    [
        ({"a": 1}, "missing field"),
        ({"a": 1, "b": "x", "c": 3}, "extra field"),
        ({"a": "1", "b": "x"}, "text for an integer"),
        ({"a": True, "b": "x"}, "a boolean for an integer"),
        ({"a": 2**31, "b": "x"}, "out of range"),
        ({"a": 1, "b": 7}, "a number for a string"),
        ([1, "x"], "not a row"),
    ],
)
def test_a_row_no_value_of_the_schema_equals_encodes_to_none(row: Any, why: str) -> None:
    schema = S.StructType((S.StructField("a", S.INTEGER, True), S.StructField("b", S.STRING, True)))
    encode = flat_row_encoder(schema)
    assert encode is not None
    assert encode(row) is None, why


def test_other_types_have_no_encoder() -> None:
    for t in (S.DOUBLE, S.TIMESTAMP, S.BINARY, S.DecimalType(10, 2)):
        assert flat_row_encoder(S.StructType((S.StructField("x", t, True),))) is None


@pytest.mark.skipif(not CASES_DIR.is_dir(), reason="no fixtures")
def test_every_fixture_key_it_encodes_is_its_stored_bytes() -> None:
    """Every key of every single-store operator whose key schema it encodes: the stored key
    ends with the encoded row, after the same prefix throughout a store."""
    checked = 0
    cases = set()
    for case in CASES:
        ckpt = ckpt_cli.open(str(case.checkpoint))
        for op_id, op in ckpt.operators.items():
            if list(op.stores) != ["default"] or op.metadata_v2_files:
                continue
            try:
                decoder = decoder_for(ckpt, op_id, "default")
            except Exception:  # noqa: BLE001 - stores ckpt reads otherwise
                continue
            schema = decoder.schema
            encode = flat_row_encoder(schema.key) if schema is not None else None
            if encode is None or type(decoder).__name__ != "RowDecoder":
                continue
            store = op.stores["default"]
            prefixes = set()
            for p in sorted(store.partitions)[:3]:
                version = max(f.version or 0 for f in store.partitions[p].files)
                try:
                    plan = plan_version(ckpt, op_id, p, version)
                except Exception:  # noqa: BLE001 - damaged fixtures
                    continue
                for raw, _ in iter_state(ckpt, plan):
                    row = encode(json.loads(json.dumps(decoder.json_key(raw))))
                    assert row is not None and raw.endswith(row), (case.name, raw.hex())
                    prefixes.add(raw[: len(raw) - len(row)])
                    checked += 1
                    cases.add(case.name)
            assert len(prefixes) <= 1, case.name
    assert checked > 200 and len(cases) >= 10, (checked, sorted(cases))
