"""Small mends of issue 18's review: the benchmark harness byte-compiles ckpt once per
script run, and whether a type holds a map is one public predicate (``plain_arrow.has_map``)
that the columnar replay and the CSV writer both use."""

from __future__ import annotations

import compileall
import sys
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.formats import spark_types as S
from ckpt_cli.replay import csv_arrow
from ckpt_cli.state import columns
from ckpt_cli.state.plain_arrow import has_map

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import common  # noqa: E402


def test_alternate_byte_compiles_once_per_run(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[Any] = []
    monkeypatch.setattr(compileall, "compile_dir", lambda *a, **k: compiled.append(a))
    common.byte_compiled.cache_clear()
    case = common.Case("A", lambda: common.Measurement(0.0, 0.0, 0))
    common.alternate([case], 2)
    common.alternate([case], 1)
    assert len(compiled) == 1


LONG = S.AtomicType("long")
MAP = S.MapType(S.AtomicType("string"), LONG)


@pytest.mark.parametrize(
    ("t", "expected"),
    [
        (LONG, False),
        (MAP, True),
        (S.ArrayType(MAP), True),
        (S.StructType((S.StructField("a", LONG), S.StructField("m", S.ArrayType(MAP)))), True),
        (S.UserDefinedType("Udt", S.StructType((S.StructField("m", MAP),))), True),
        (S.StructType((S.StructField("a", S.ArrayType(LONG)),)), False),
    ],
)
def test_has_map_at_any_depth(t: S.DataType, expected: bool) -> None:
    assert has_map(t) is expected


def test_one_map_predicate_for_both_writers() -> None:
    assert vars(columns)["has_map"] is has_map and vars(csv_arrow)["has_map"] is has_map
    assert "_has_map" not in vars(columns)
