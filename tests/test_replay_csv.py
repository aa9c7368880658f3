"""``ckpt replay --format csv`` through Arrow's writer (``replay/csv_arrow``): parsed back with
Python's ``csv`` module, every fixture read gives the JSON lines rows cell for cell; the
columnar and the row path give the same bytes; the values that need care (commas, quotes,
line breaks, non-ASCII, nulls and empty strings, lists, maps, nested structs) survive."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

import pytest

from ckpt_cli.formats import spark_types as S
from ckpt_cli.formats.state_schema import StateSchema
from ckpt_cli.replay.csv_arrow import CsvSchema, _tables_of, schema_of
from ckpt_cli.state import columns
from ckpt_cli.state.decoders import RowDecoder
from tests.conftest import CASES, Case, run_cli
from tests.formats.test_unsaferow import field, write_row
from tests.test_replay import HDFS, jsonl, spark_reads, store_args

pa = pytest.importorskip("pyarrow")

READS = spark_reads("state") + spark_reads("changes")


def replay_csv(*args: str) -> str:
    result = run_cli("replay", *args, "--format", "csv")
    assert result.exit_code == 0, result.stderr
    return result.stdout


def read_args(read: dict[str, Any]) -> list[str]:
    args = ["--batch", str(read["batch_id"]), *store_args(read)]
    options = read["reader_options"]
    if options.get("readChangeFeed") == "true":
        args = [*store_args(read), "--changes", "--from", str(options["changeStartBatchId"])]
        if "changeEndBatchId" in options:
            args += ["--to", str(options["changeEndBatchId"])]
    return args


def parsed(text: str) -> tuple[list[str], list[list[str]]]:
    lines = list(csv.reader(io.StringIO(text, newline="")))
    return lines[0], lines[1:]


def lookup(row: dict[str, Any], name: str) -> Any:
    """The value a dotted column holds in a nested JSON row (a null struct: null fields)."""
    value: Any = row
    for part in name.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def leaves(value: Any, prefix: str, header: set[str]) -> list[str]:
    """The columns a JSON row needs: dicts flattened until a name is a column."""
    if value is None and prefix not in header:
        assert any(n.startswith(f"{prefix}.") for n in header), prefix
        return []  # a null struct: its columns are null
    if prefix in header or not isinstance(value, dict):
        return [prefix]
    return [name for k, v in value.items() for name in leaves(v, f"{prefix}.{k}", header)]


def assert_cell(cell: str, value: Any, where: str) -> None:
    if value is None:
        assert cell == "", where
    elif isinstance(value, bool):
        assert cell == ("true" if value else "false"), where
    elif isinstance(value, float):
        assert math.isclose(float(cell), value, rel_tol=0, abs_tol=0) or math.isnan(value), where
    elif isinstance(value, (list, dict)):
        assert json.loads(cell) == value, where
    else:
        assert cell == str(value), where


def assert_csv_equals_rows(text: str, rows: list[dict[str, Any]]) -> None:
    if not rows:
        # No rows: nothing but perhaps a header (an empty partition's read).
        assert len(list(csv.reader(io.StringIO(text, newline="")))) <= 1
        return
    header, cells = parsed(text)
    assert len(set(header)) == len(header)
    assert len(cells) == len(rows)
    names = set(header)
    for i, (line, row) in enumerate(zip(cells, rows, strict=True)):
        assert len(line) == len(header)
        needed = [n for k, v in row.items() for n in leaves(v, k, names)]
        assert set(needed) <= names, f"row {i}: columns dropped {set(needed) - names}"
        for name, cell in zip(header, line, strict=True):
            assert_cell(cell, lookup(row, name), f"row {i} {name}")


@pytest.mark.skipif(not CASES, reason="no fixtures")
@pytest.mark.parametrize(("case", "read"), READS)
def test_csv_equals_json_lines(case: Case, read: dict[str, Any]) -> None:
    args = [str(case.checkpoint), *read_args(read)]
    rows = jsonl(*args)
    text = replay_csv(*args)
    assert_csv_equals_rows(text, rows)
    assert "\r" not in text.replace('\r"', "")  # LF line ends, as Spark's CSV writer


def _store_reads() -> list[Any]:
    """One read (the newest batch) of each store read in the store schema's shape."""
    newest: dict[tuple[str, str], Any] = {}
    for param in spark_reads("state"):
        case, read = param.values
        options = read["reader_options"]
        if "stateVarName" in options or read.get("join_side") or "readRegisteredTimers" in options:
            continue
        store = (case.name, " ".join(store_args(read)))
        if store not in newest or newest[store].values[1]["batch_id"] < read["batch_id"]:
            newest[store] = param
    return list(newest.values())


@pytest.mark.skipif(not CASES, reason="no fixtures")
@pytest.mark.parametrize(("case", "read"), _store_reads())
def test_row_path_gives_the_same_bytes(
    case: Case, read: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    args = [str(case.checkpoint), *read_args(read)]
    fast = replay_csv(*args)
    threads = replay_csv(*args, "--workers", "3")
    monkeypatch.setattr(columns, "ENABLED", False)
    assert replay_csv(*args) == fast == threads
    assert fast.count("\n") >= 1  # the header at least


def test_limit_where_and_empty_state() -> None:
    full = replay_csv(str(HDFS))
    header = full.splitlines()[0]
    assert header == "partition_id,key.k,value.count,value.sum,value.max"
    assert replay_csv(str(HDFS), "--limit", "2") == "\n".join(full.splitlines()[:3]) + "\n"
    assert replay_csv(str(HDFS), "--limit", "0") == header + "\n"
    # A filter that matches nothing: the header all the same.
    assert replay_csv(str(HDFS), "--where", "k=nobody") == header + "\n"
    one = replay_csv(str(HDFS), "--where", "k=k3")
    assert one.splitlines()[1:] == [line for line in full.splitlines() if ',"k3",' in line]


def test_output_file_and_errors(tmp_path: Any) -> None:
    out = tmp_path / "state.csv"
    result = run_cli("replay", str(HDFS), "--format", "csv", "--output", str(out))
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes().decode() == replay_csv(str(HDFS))
    bad = run_cli("replay", str(HDFS), "--format", "csv", "--where", "nope=1")
    assert bad.exit_code == 2 and "no column 'nope'" in bad.stderr
    assert "Traceback" not in bad.stderr


# -- synthetic values ------------------------------------------------------------------------

KEY = S.StructType((field("k", S.STRING),))
VALUE = S.StructType(
    (
        field("s", S.STRING),
        field("n", S.LONG),
        field("d", S.DOUBLE),
        field("ok", S.BOOLEAN),
        field("tags", S.ArrayType(S.STRING)),
        field(
            "w",
            S.StructType(
                (field("a", S.INTEGER), field("b", S.StructType((field("c", S.STRING),))))
            ),
        ),
        field("none", S.NULL),
    )
)
STRINGS = ["plain", "a,b", 'say "hi"', "two\nlines", "cr\r\nlf", "ünï ✓ 😀", "", None]


def _rows() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    out = []
    for i, s in enumerate(STRINGS * 2):
        value = {
            "s": s,
            "n": None if i % 3 == 0 else (-1) ** i * 10**15 * i,
            "d": [0.1, -0.0, 1e16, 1.5, None, 3.0][i % 6],
            "ok": [True, False, None][i % 3],
            "tags": None if i % 4 == 0 else [s, None, 'x,"y"'][: i % 4],
            "w": None if i % 5 == 0 else {"a": i, "b": None if i % 2 else {"c": s}},
            "none": None,
        }
        out.append(({"k": f"k{i},{s}"}, value))
    return out


def _encoded(provider: str = "hdfs") -> tuple[RowDecoder, CsvSchema, list[tuple[bytes, bytes]]]:
    decoder = RowDecoder(StateSchema(KEY, VALUE, 2), provider)
    schema = schema_of(decoder)
    assert schema is not None
    pairs = [(write_row(KEY, k), write_row(VALUE, v)) for k, v in _rows()]
    return decoder, schema, pairs


def test_values_that_need_care_survive_both_paths() -> None:
    decoder, schema, pairs = _encoded()
    columnar = columns.columnar_for(decoder)
    assert columnar is not None
    fast = schema.csv(columnar.table(5, pairs))
    rows = [decoder.row(5, k, v) for k, v in pairs]
    slow = schema.csv(pa.Table.from_pylist(rows, schema=schema.arrow))
    assert fast == slow
    text = ",".join(schema.header) + "\n" + fast.decode()
    assert schema.header == [
        "partition_id", "key.k", "value.s", "value.n", "value.d", "value.ok", "value.tags",
        "value.w.a", "value.w.b.c", "value.none",
    ]  # fmt: skip
    assert_csv_equals_rows(text, [json.loads(decoder.line(5, k, v)) for k, v in pairs])
    # Lists as compact JSON, the text JSON lines have; strings always quoted, numbers not.
    assert b'"[""a,b""]"' in fast and '"[""ünï ✓ 😀""]"'.encode() in fast
    assert b'"["""",null]"' in fast
    assert b"true" in fast and b",1e+16," in fast


def test_null_and_empty_string_stay_apart() -> None:
    decoder, schema, pairs = _encoded()
    rows = [decoder.row(0, k, v) for k, v in pairs]
    text = schema.csv(pa.Table.from_pylist(rows, schema=schema.arrow)).decode()
    # STRINGS[6] is "", STRINGS[7] None: the value.s cell is "" for one, nothing for the other.
    assert '\n0,"k6,","",' in text
    assert '\n0,"k7,None",,' in text


def test_maps_are_json_text_not_columns() -> None:
    value = S.StructType((field("m", S.MapType(S.STRING, S.LONG)), field("n", S.LONG)))
    decoder = RowDecoder(StateSchema(KEY, value, 2), "hdfs")
    schema = schema_of(decoder)
    assert schema is not None and columns.columnar_for(decoder) is None
    rows = [
        {"partition_id": 0, "key": {"k": "a"}, "value": {"m": {"x": 1, "y,z": None}, "n": 1}},
        {"partition_id": 0, "key": {"k": "b"}, "value": {"m": {"other": 2}, "n": None}},
        {"partition_id": 0, "key": {"k": "c"}, "value": None},
    ]
    text = schema.csv(pa.Table.from_pylist(rows, schema=schema.arrow)).decode()
    assert schema.header == ["partition_id", "key.k", "value.m", "value.n"]
    assert_csv_equals_rows(",".join(schema.header) + "\n" + text, rows)


def test_non_finite_floats_alike_on_both_paths() -> None:
    value = S.StructType((field("d", S.DOUBLE), field("l", S.ArrayType(S.DOUBLE))))
    decoder = RowDecoder(StateSchema(KEY, value, 2), "hdfs")
    schema = schema_of(decoder)
    columnar = columns.columnar_for(decoder)
    assert schema is not None and columnar is not None
    values = [
        {"d": math.nan, "l": [math.inf, 1.0]},
        {"d": -math.inf, "l": None},
        {"d": 2.5, "l": []},
    ]
    pairs = [(write_row(KEY, {"k": str(i)}), write_row(value, v)) for i, v in enumerate(values)]
    fast = schema.csv(columnar.table(0, pairs))
    rows = [decoder.row(0, k, v) for k, v in pairs]
    slow = b"".join(schema.csv(t) for t in _tables_of(rows, schema))
    assert fast == slow == b'0,"0",nan,"[""inf"",1.0]"\n0,"1",-inf,\n0,"2",2.5,"[]"\n'
    text = ",".join(schema.header) + "\n" + fast.decode()
    assert_csv_equals_rows(text, [json.loads(decoder.line(0, k, v)) for k, v in pairs])
