"""The Python API of replay (``read_state`` and its ``StateRows``) gives what ``ckpt replay``
writes: the same rows as JSON lines, the same Arrow table as parquet."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.replay import StateRows, read_state
from ckpt_cli.state.target import SelectionError
from ckpt_cli.state.where import parse_where
from tests.conftest import CASES, CASES_DIR, run_cli

pytestmark = pytest.mark.skipif(not CASES, reason="no fixtures")

HDFS = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"
ROCKSDB_V2 = CASES_DIR / "spark4-rocksdb-v2" / "checkpoint"
JOIN = CASES_DIR / "spark4-join" / "checkpoint"


def canon(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def cli_jsonl(*args: str) -> list[dict[str, Any]]:
    result = run_cli("replay", *args, "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines() if line]


@pytest.mark.parametrize("root", [HDFS, ROCKSDB_V2], ids=["hdfs", "rocksdb-v2"])
def test_rows_equal_the_cli_json_lines(root: Path) -> None:
    rows = read_state(str(root))
    assert isinstance(rows, StateRows) and rows.notes == []
    got = list(rows)
    assert got and canon(got) == canon(cli_jsonl(str(root)))
    assert canon(list(rows)) == canon(got)  # iterating again reads again


@pytest.mark.parametrize("root", [HDFS, ROCKSDB_V2], ids=["hdfs", "rocksdb-v2"])
def test_to_arrow_equals_the_cli_parquet(root: Path, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "state.parquet"
    result = run_cli("replay", str(root), "--format", "parquet", "--output", str(out))
    assert result.exit_code == 0, result.stderr
    written = pq.read_table(out)
    table = read_state(str(root)).to_arrow()
    assert table.schema == written.schema
    assert table.equals(written)
    assert canon(table.to_pylist()) == canon(cli_jsonl(str(root)))


def test_to_pandas() -> None:
    pytest.importorskip("pandas")
    frame = read_state(str(HDFS), partitions=[1]).to_pandas()
    assert list(frame.columns) == ["partition_id", "key", "value"]
    assert set(frame["partition_id"]) == {1} and len(frame) == len(cli_jsonl(str(HDFS), "-p", "1"))


def test_where_and_the_change_feed() -> None:
    rows = list(read_state(str(HDFS), where={"k": "k3"}))
    assert [r["key"] for r in rows] == [{"k": "k3"}]
    start = read_state(str(HDFS)).target.batch - 1  # the older batches' deltas are cleaned up
    feed = list(read_state(str(HDFS), change_start_batch=start))
    assert {r["batch_id"] for r in feed} == {start, start + 1}
    assert canon(feed) == canon(cli_jsonl(str(HDFS), "--changes", "--from", str(start)))


def test_library_errors_name_arguments_the_cli_its_options() -> None:
    with pytest.raises(SelectionError) as caught:
        read_state(str(JOIN))
    assert "choose one with store (" in caught.value.message and "--" not in caught.value.message
    with pytest.raises(SelectionError, match=r"^where 'nope=1': the key has no column 'nope'"):
        read_state(str(HDFS), where={"nope": "1"})
    with pytest.raises(SelectionError, match=r"^change_start_batch 3 is after change_end_batch 1$"):
        read_state(str(HDFS), change_start_batch=3, change_end_batch=1)
    with pytest.raises(SelectionError, match=r"^change_end_batch is given without change_start"):
        read_state(str(HDFS), change_end_batch=1)
    result = run_cli("replay", str(HDFS), "--changes", "--from", "3", "--to", "1")
    assert result.exit_code == 2 and "error: --from 3 is after --to 1" in result.stderr
    result = run_cli("replay", str(HDFS), "--where", "nope=1")
    assert "error: --where 'nope=1': the key has no column 'nope'" in result.stderr


EXPRESSIONS = [
    "value.count > 5",
    "key.k in ('k1', 'k3') or value.sum < 250",
    "k != 'k0' and value.max >= '2024-01-01T00:17:00Z'",
    "value.count is not null",
]


@pytest.mark.parametrize("where", EXPRESSIONS)
def test_where_takes_the_state_delete_language(where: str) -> None:
    """``replay --where`` and ``state delete --where`` are one language: the rows kept are
    the rows ``state.where`` matches, in the state, the change feed and the CLI alike."""
    test = parse_where(where)
    everything = list(read_state(str(HDFS)))
    want = [r for r in everything if test(r)]
    assert 0 < len(want) < len(everything) or where.endswith("not null")
    assert canon(list(read_state(str(HDFS), where=where))) == canon(want)
    assert canon(cli_jsonl(str(HDFS), "--where", where)) == canon(want)
    start = read_state(str(HDFS)).target.batch - 1
    feed = list(read_state(str(HDFS), change_start_batch=start))
    kept = list(read_state(str(HDFS), change_start_batch=start, where=where))
    assert canon(kept) == canon([r for r in feed if test(r)])


def test_where_pairs_and_expressions_all_hold() -> None:
    rows = cli_jsonl(str(HDFS), "--where", "k=k1", "--where", "value.count > 5")
    assert [r["key"] for r in rows] == [{"k": "k1"}]
    assert cli_jsonl(str(HDFS), "--where", "k=k1", "--where", "value.count > 99") == []
    result = run_cli("replay", str(HDFS), "--where", "value.nope > 5")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: --where 'value.nope > 5': no column value.nope (columns: key.k, value.count, "
        "value.max, value.sum)"
    ]


def test_where_on_a_state_variable_reads_its_own_value_columns() -> None:
    """A transformWithState variable's rows: ``value.*`` names the variable's value fields
    (not its key's), as the columns in the error say."""
    tws = CASES_DIR / "spark4-tws-vars" / "checkpoint"
    every = cli_jsonl(str(tws), "--state-var", "cnt")
    want = [r for r in every if r["value"]["n"] >= 4 and r["key"]["k"] != "k1"]
    assert 0 < len(want) < len(every)
    got = cli_jsonl(str(tws), "--state-var", "cnt", "--where", "value.n >= 4 and key.k != 'k1'")
    assert canon(got) == canon(want)
    bad = run_cli("replay", str(tws), "--state-var", "cnt", "--where", "value.k = 'x'")
    assert bad.exit_code == 2 and "(columns: key.k, value.n)" in bad.stderr
