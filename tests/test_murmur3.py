"""``formats.murmur3`` against Spark's own ``hash()`` and ``pmod(hash(), m)``.

``fixtures/hash/expected.json`` was written by ``fixtures/generate_hash.py`` with Spark 4.3:
edge-case values of every type a state key can hold, and 500 plain keys.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckpt_cli.errors import FormatError
from ckpt_cli.formats import murmur3
from ckpt_cli.formats import murmur3_columns as columns
from ckpt_cli.formats import spark_types as S
from tests.formats.test_unsaferow import write_row

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "hash" / "expected.json"
ORACLE = json.loads(FIXTURE.read_text())
SCHEMA = S.parse_struct_json(str(FIXTURE), json.dumps(ORACLE["schema"]))
EPOCH = dt.datetime(1970, 1, 1)


def decode(value: Any, t: S.DataType) -> Any:
    """The fixture's JSON encoding -> the Python value ``formats.unsaferow`` decodes."""
    if value is None:
        return None
    if isinstance(t, S.AtomicType):
        if t.name in ("float", "double"):
            return float.fromhex(value)
        if t.name == "binary":
            return bytes.fromhex(value)
        if t.name == "date":
            return dt.date.fromisoformat(value)
        if t.name == "timestamp":
            return (EPOCH + dt.timedelta(microseconds=value)).replace(tzinfo=dt.timezone.utc)
        if t.name == "timestamp_ntz":
            return EPOCH + dt.timedelta(microseconds=value)
        return value
    if isinstance(t, S.DecimalType):
        return Decimal(value)
    if isinstance(t, S.DayTimeIntervalType):
        return dt.timedelta(microseconds=value)
    if isinstance(t, S.StructType):
        names = t.unique_names()
        return {n: decode(v, f.data_type) for n, v, f in zip(names, value, t.fields, strict=True)}
    if isinstance(t, S.ArrayType):
        return [decode(v, t.element_type) for v in value]
    if isinstance(t, S.MapType):
        return [(decode(k, t.key_type), decode(v, t.value_type)) for k, v in value]
    raise AssertionError(f"no decoding for {t}")


ROWS = [
    [decode(v, f.data_type) for v, f in zip(row["values"], SCHEMA.fields, strict=True)]
    for row in ORACLE["rows"]
]
TYPES = [f.data_type for f in SCHEMA.fields]


def test_the_oracle_was_written_by_spark() -> None:
    assert ORACLE["spark_version"].startswith("4.")
    assert ORACLE["seed"] == murmur3.SEED
    assert len(ORACLE["rows"]) >= 10 and len(ORACLE["keys"]) >= 100


@pytest.mark.parametrize("column", range(len(SCHEMA.fields)), ids=SCHEMA.names)
def test_each_type_hashes_as_spark(column: int) -> None:
    name, t = SCHEMA.names[column], TYPES[column]
    for values, row in zip(ROWS, ORACLE["rows"], strict=True):
        assert murmur3.hash_value(values[column], t) == row["hash"][name], (name, values[column])
        for m in ORACLE["moduli"]:
            expected = row["pmod"][str(m)][name]
            assert murmur3.pmod(murmur3.hash_value(values[column], t), m) == expected


def test_rows_chain_the_seed_through_every_column() -> None:
    for values, row in zip(ROWS, ORACLE["rows"], strict=True):
        h = murmur3.hash_row(values, TYPES)
        assert h == row["hash"]["*"]
        assert all(murmur3.pmod(h, m) == row["pmod"][str(m)]["*"] for m in ORACLE["moduli"])


def test_the_null_row_hashes_to_the_seed() -> None:
    nulls = [values for values in ROWS if all(v is None for v in values)]
    assert nulls and murmur3.hash_row(nulls[0], TYPES) == murmur3.SEED


def test_plain_keys_scalar_and_vectorised() -> None:
    keys = ORACLE["keys"]
    ints = np.array([k["i"] for k in keys])
    longs = np.array([k["l"] for k in keys])
    assert columns.hash_int_array(ints).tolist() == [k["h_i"] for k in keys]
    assert columns.hash_long_array(longs).tolist() == [k["h_l"] for k in keys]
    for k in keys:
        assert murmur3.hash_int(k["i"]) == k["h_i"]
        assert murmur3.hash_long(k["l"]) == k["h_l"]
        assert murmur3.hash_unsafe_bytes(k["s"].encode()) == k["h_s"]
        assert murmur3.hash_row([k["s"], k["i"]], [S.STRING, S.INTEGER]) == k["h_si"]
        assert murmur3.pmod(k["h_s"], 5) == k["p5_s"]
    # Chaining a second column through per-key seeds.
    seeds = [murmur3.hash_unsafe_bytes(k["s"].encode()) for k in keys]
    assert columns.hash_int_array(ints, seeds).tolist() == [k["h_si"] for k in keys]
    assert columns.pmod_array([k["h_s"] for k in keys], 5).tolist() == [k["p5_s"] for k in keys]


def test_tail_bytes_are_signed_and_mixed_one_by_one() -> None:
    # Spark's hashUnsafeBytes differs from standard murmur3 (which packs the tail into one
    # word): b"\x80" must hash as the int -128 mixed alone, then fmix with length 1.
    h_alone = murmur3.hash_unsafe_bytes(b"\x80")
    assert h_alone != murmur3.hash_unsafe_bytes(b"\x80\x00\x00\x00")
    assert h_alone != murmur3.hash_int(0x80)


@given(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1))
def test_vectorised_ints_equal_scalar(value: int, seed: int) -> None:
    assert columns.hash_int_array([value], seed).tolist() == [murmur3.hash_int(value, seed)]


@given(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**31), 2**31 - 1))
def test_vectorised_longs_equal_scalar(value: int, seed: int) -> None:
    assert columns.hash_long_array([value], seed).tolist() == [murmur3.hash_long(value, seed)]


@given(st.binary(max_size=40).filter(lambda b: len(b) % 4 == 0))
def test_aligned_bytes_hash_as_their_words(data: bytes) -> None:
    # Word-aligned input: each 4-byte little-endian word mixed in order (as hashInt would
    # for a one-word input).
    if len(data) == 4:
        (word,) = struct.unpack("<i", data)
        assert murmur3.hash_unsafe_bytes(data) == murmur3.hash_int(word)
    assert -(2**31) <= murmur3.hash_unsafe_bytes(data) < 2**31


@given(st.integers(-(2**31), 2**31 - 1), st.integers(1, 1000))
def test_pmod_is_in_range(h: int, m: int) -> None:
    assert 0 <= murmur3.pmod(h, m) < m


def test_pmod_refuses_a_non_positive_count() -> None:
    with pytest.raises(ValueError):
        murmur3.pmod(5, 0)


def test_floats_normalise_negative_zero_and_nan() -> None:
    assert murmur3.hash_value(-0.0, S.DOUBLE) == murmur3.hash_value(0.0, S.DOUBLE)
    other_nan = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
    assert murmur3.hash_value(other_nan, S.DOUBLE) == murmur3.hash_value(float("nan"), S.DOUBLE)
    assert murmur3.hash_value(-0.0, S.FLOAT) == murmur3.hash_int(0)


def test_unhashable_types_are_refused() -> None:
    with pytest.raises(FormatError, match="variant"):
        murmur3.check_hashable(S.VARIANT, path="state/0", what="key column v")
    collated = S.StringLikeType("string collate UNICODE_CI")
    with pytest.raises(FormatError, match="collated"):
        murmur3.check_hashable(S.ArrayType(collated), path="state/0", what="key column s")
    murmur3.check_hashable(SCHEMA, path="state/0", what="key")  # every fixture type is fine


def test_columns_hash_every_type_as_spark() -> None:
    n = len(ROWS)
    for i, (name, t) in enumerate(zip(SCHEMA.names, TYPES, strict=True)):
        got = columns.hash_columns([[row[i] for row in ROWS]], [t], n).tolist()
        assert got == [row["hash"][name] for row in ORACLE["rows"]], name
    chained = columns.hash_columns([list(c) for c in zip(*ROWS, strict=True)], TYPES, n)
    assert chained.tolist() == [row["hash"]["*"] for row in ORACLE["rows"]]


def test_columns_of_plain_keys() -> None:
    keys = ORACLE["keys"]
    got = columns.hash_columns(
        [[k["s"] for k in keys], [k["i"] for k in keys]], [S.STRING, S.INTEGER], len(keys)
    )
    assert got.tolist() == [k["h_si"] for k in keys]


@given(st.lists(st.one_of(st.none(), st.text(max_size=12)), max_size=30))
def test_string_columns_equal_scalar(values: list[str | None]) -> None:
    got = columns.hash_columns([values], [S.STRING], len(values)).tolist()
    assert got == [murmur3.hash_row([v], [S.STRING]) for v in values]


@given(st.lists(st.binary(max_size=12), max_size=30), st.integers(-(2**31), 2**31 - 1))
def test_byte_arrays_equal_scalar(values: list[bytes], seed: int) -> None:
    got = columns.hash_bytes_array(values, seed).tolist()
    assert got == [murmur3.hash_unsafe_bytes(v, seed) for v in values]


def test_unsafe_row_slots_hash_as_spark() -> None:
    # The flat columns of the oracle rows written as UnsafeRows (behind a RocksDB version
    # byte): hashing them from their slots gives Spark's hash of each column and of all.
    flat = [i for i, t in enumerate(TYPES) if columns.raw_hashable(t)]
    assert len(flat) >= 8
    sub = S.StructType(tuple(SCHEMA.fields[i] for i in flat))
    rows = [b"\x00" + write_row(sub, tuple(row[i] for i in flat)) for row in ROWS]
    for ordinal, i in enumerate(flat):
        got = columns.hash_unsafe_rows(rows, 1, len(flat), [(ordinal, TYPES[i])]).tolist()
        assert got == [row["hash"][SCHEMA.names[i]] for row in ORACLE["rows"]], SCHEMA.names[i]
    every = [(ordinal, TYPES[i]) for ordinal, i in enumerate(flat)]
    expected = [murmur3.hash_row([row[i] for i in flat], [TYPES[i] for i in flat]) for row in ROWS]
    assert columns.hash_unsafe_rows(rows, 1, len(flat), every).tolist() == expected
    with pytest.raises(ValueError):
        columns.hash_unsafe_rows([rows[0][:12]], 1, len(flat), every)
