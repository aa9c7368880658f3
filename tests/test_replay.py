"""``ckpt replay`` equals Spark's statestore source on every fixture read, as sets of rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CASES, CASES_DIR, Case, run_cli
from tests.test_state_vs_spark import _join_format_4_side, _without_event_time

pytestmark = pytest.mark.skipif(not CASES, reason="no fixtures")

HDFS = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"


def spark_reads(kind: str) -> list[Any]:
    out = []
    for case in CASES:
        for read in case.expected.get("state_reads", []):
            if "error" in read or "rows_file" not in read:
                continue
            is_feed = read["reader_options"].get("readChangeFeed") == "true"
            if (kind == "changes") == is_feed:
                name = read["rows_file"].rsplit("/", 1)[-1]
                out.append(pytest.param(case, read, id=f"{case.name}-{name}"))
    return out


def canon(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def spark_rows(case: Case, read: dict[str, Any]) -> list[dict[str, Any]]:
    path = case.root / "state" / read["rows_file"].rsplit("/", 1)[-1]
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def jsonl(*args: str) -> list[dict[str, Any]]:
    result = run_cli("replay", *args, "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines() if line]


def store_args(read: dict[str, Any]) -> list[str]:
    """The options of ``ckpt replay`` for each of the read's Spark options."""
    options = read["reader_options"]
    args = ["--operator", str(read["operator_id"])]
    if read.get("store_name"):
        args += ["--store", read["store_name"]]
    if read.get("join_side"):
        args += ["--join-side", read["join_side"]]
    if "stateVarName" in options:
        args += ["--state-var", options["stateVarName"]]
    if options.get("readRegisteredTimers") == "true":
        args.append("--timers")
    if options.get("flattenCollectionTypes") == "false":
        args.append("--no-flatten")
    part = options.get("snapshotPartitionId")
    if part is not None:
        args += ["--partition", str(part)]
    return args


def assert_same_rows(case: Case, read: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    spark = spark_rows(case, read)
    if _join_format_4_side(case, read):  # Spark's __event_time is wrong (test_state_vs_spark)
        rows, spark = _without_event_time(rows), _without_event_time(spark)
    assert canon(rows) == canon(spark)


@pytest.mark.parametrize(("case", "read"), spark_reads("state"))
def test_replay_jsonl_equals_spark_statestore(case: Case, read: dict[str, Any]) -> None:
    rows = jsonl(str(case.checkpoint), "--batch", str(read["batch_id"]), *store_args(read))
    assert_same_rows(case, read, rows)


@pytest.mark.parametrize(("case", "read"), spark_reads("changes"))
def test_change_feed_equals_spark_read_change_feed(case: Case, read: dict[str, Any]) -> None:
    options = read["reader_options"]
    rows = jsonl(
        str(case.checkpoint),
        "--changes",
        "--from",
        options["changeStartBatchId"],
        "--to",
        options["changeEndBatchId"],
        *store_args(read),
    )
    assert_same_rows(case, read, rows)


def test_parallel_partitions_equal_one_process() -> None:
    join = str(CASES_DIR / "spark4-join" / "checkpoint")
    args = ["--store", "left-keyWithIndexToValue"]
    one = jsonl(join, *args, "--workers", "1")
    many = jsonl(join, *args, "--workers", "2")
    assert one and canon(one) == canon(many)


def test_where_filters_keys() -> None:
    rows = jsonl(str(HDFS), "--where", "k=k3")
    assert [r["key"] for r in rows] == [{"k": "k3"}]
    result = run_cli("replay", str(HDFS), "--where", "nope=1")
    assert result.exit_code == 2 and "no column 'nope'" in result.stderr


def test_raw_gives_hex() -> None:
    rows = jsonl(str(HDFS), "--raw", "--limit", "1")
    assert len(rows) == 1 and isinstance(rows[0]["key"], str)
    bytes.fromhex(rows[0]["key"])


def test_csv_and_table_and_json() -> None:
    result = run_cli("replay", str(HDFS), "--format", "csv")
    assert result.exit_code == 0
    header = result.stdout.splitlines()[0]
    assert header == "partition_id,key.k,value.count,value.sum,value.max"
    table = run_cli("replay", str(HDFS))
    assert table.exit_code == 0 and "state after batch" in table.stdout
    data = run_cli("replay", str(HDFS), "--json", "--limit", "2").json()
    assert data["row_count"] == 2 and data["target"]["version"] == data["target"]["batch"] + 1


def test_missing_delta_is_one_line_then_best_effort(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    shutil.copytree(HDFS, root)
    latest = max(int(p.name) for p in (root / "commits").iterdir() if p.name.isdigit())
    version = latest + 1
    if (root / f"state/0/1/{version}.snapshot").exists():
        (root / f"state/0/1/{version}.snapshot").unlink()
    (root / f"state/0/1/{version}.delta").unlink()
    result = run_cli("replay", str(root), "--format", "jsonl")
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"{version} .delta missing" in errors[0]
    assert "state/0/1" in errors[0]
    result = run_cli("replay", str(root), "--format", "jsonl", "--best-effort")
    assert result.exit_code == 0
    assert f"replayed version {version - 1}" in result.stderr
    assert {json.loads(line)["partition_id"] for line in result.stdout.splitlines()} == {0, 1}


def test_batch_outside_the_retained_range() -> None:
    result = run_cli("replay", str(HDFS), "--batch", "999")
    assert result.exit_code == 2 and "batch 999 is not committed" in result.stderr
    result = run_cli("replay", str(HDFS), "--batch", "0")
    assert result.exit_code == 2 and "cannot be rebuilt" in result.stderr


def test_operator_and_store_must_be_chosen() -> None:
    result = run_cli("replay", str(CASES_DIR / "spark4-join" / "checkpoint"))
    assert result.exit_code == 2 and "--store" in result.stderr
    result = run_cli("replay", str(CASES_DIR / "spark4-multi-op" / "checkpoint"))
    assert result.exit_code == 2 and "--operator" in result.stderr


def test_parquet_output(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "state.parquet"
    result = run_cli("replay", str(HDFS), "--format", "parquet", "--output", str(out))
    assert result.exit_code == 0, result.stderr
    table = pq.read_table(out)
    assert table.num_rows == len(jsonl(str(HDFS)))


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("state.jsonl", "jsonl"),
        ("state.NDJSON", "jsonl"),
        ("state.json", "jsonl"),
        ("state.csv", "csv"),
        ("state.parquet", "parquet"),
        ("state.pq", "parquet"),
        ("state.out", "jsonl"),
        ("state", "jsonl"),
    ],
)
def test_output_file_takes_its_format_from_its_name(tmp_path: Path, name: str, fmt: str) -> None:
    """-o FILE without --format writes FILE (it printed a table and wrote nothing)."""
    out = tmp_path / name
    result = run_cli("replay", str(HDFS), "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    expected = canon(jsonl(str(HDFS)))
    if fmt == "parquet":
        pq = pytest.importorskip("pyarrow.parquet")
        assert canon(pq.read_table(out).to_pylist()) == expected
    elif fmt == "csv":
        assert out.read_text().startswith("partition_id,key.k,value.count")
        assert len(out.read_text().splitlines()) == len(expected) + 1
    else:
        assert canon([json.loads(line) for line in out.read_text().splitlines()]) == expected


def test_json_with_an_output_file_writes_it(tmp_path: Path) -> None:
    """--json with -o wrote no file and printed the rows; it writes the file and says so."""
    out = tmp_path / "state.jsonl"
    result = run_cli("replay", "--json", str(HDFS), "-o", str(out))
    assert result.exit_code == 0, result.stderr
    said = json.loads(result.stdout)
    assert said["output"] == str(out) and said["format"] == "jsonl"
    assert said["rows"] == len(out.read_text().splitlines()) == len(jsonl(str(HDFS)))


def test_output_dash_is_stdout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli("replay", str(HDFS), "-o", "-")
    assert result.exit_code == 0, result.stderr
    assert canon([json.loads(x) for x in result.stdout.splitlines()]) == canon(jsonl(str(HDFS)))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--format", "table", "-o", "x.txt"], "--format table is for the terminal"),
        (["--format", "table", "-O", "d"], "--format table is for the terminal"),
        (["--format", "csv", "-O", "d"], "not csv"),
    ],
)
def test_formats_that_cannot_be_written_there_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], said: str
) -> None:
    """--format csv -O wrote jsonl files; table with -o printed and wrote nothing."""
    monkeypatch.chdir(tmp_path)
    result = run_cli("replay", str(HDFS), *args)
    assert result.exit_code == 2
    assert said in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_library_refuses_a_table_written_to_a_file(tmp_path: Path) -> None:
    import ckpt_cli
    from ckpt_cli.errors import CkptError
    from ckpt_cli.replay.run import run_replay

    ckpt = ckpt_cli.open(str(HDFS))
    with pytest.raises(CkptError, match="shown on the terminal"):
        run_replay(ckpt, fmt="table", output=str(tmp_path / "x"))
    with pytest.raises(CkptError, match="not csv"):
        run_replay(ckpt, fmt="csv", output_dir=str(tmp_path / "d"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("bitmap_bits", [8, 1 << 26])
def test_first_delta_streamed_with_repeats_and_removes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bitmap_bits: int
) -> None:
    """Without a snapshot, delta 1 is streamed; keys it repeats or removes, and keys later
    deltas change, come out as applying every record in order gives (8 bits: every key
    looks repeated; 2^26: almost none does)."""
    import random
    import struct
    import sys

    from ckpt_cli.core import read as read_mod
    from ckpt_cli.core.model import Checkpoint
    from ckpt_cli.core.read import iter_file_records, iter_state
    from ckpt_cli.core.rebuild import plan_version
    from ckpt_cli.formats.compression import compress

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from synthetic import build, key_row, value_row

    monkeypatch.setattr(read_mod, "_BITMAP_BITS", bitmap_bits)
    root = tmp_path / "ckpt"
    build(root, partitions=1, versions=4, keys=300, snapshot_every=100, crc=False)
    rng = random.Random(7)
    pack = struct.Struct(">i").pack
    for version in range(1, 5):
        out = bytearray()
        for _ in range(400 if version == 1 else 40):
            i = rng.randrange(300)
            k = key_row(i)
            if rng.random() < 0.15:
                out += pack(len(k)) + k + pack(-1)  # a remove
            else:
                v = value_row(version, rng.randrange(10_000))
                out += pack(len(k)) + k + pack(len(v)) + v
        out += pack(-1)
        (root / f"state/0/0/{version}.delta").write_bytes(compress(bytes(out), "lz4"))
    ckpt = Checkpoint.open(str(root))
    plan = plan_version(ckpt, 0, 0, 4)
    assert plan.base is None and len(plan.steps) == 4
    expected: dict[bytes, bytes] = {}
    for step in plan.steps:
        for _kind, key, value in iter_file_records(ckpt, step):
            if value is None:
                expected.pop(key, None)
            else:
                expected[key] = value
    rows = list(iter_state(ckpt, plan))
    assert len(rows) == len({k for k, _ in rows})  # every key once
    assert dict(rows) == expected and expected
