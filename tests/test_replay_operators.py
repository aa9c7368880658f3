"""Joins, session windows, applyInPandasWithState and dropDuplicatesWithinWatermark written
by Spark 4.3: what test_state_vs_spark (every read Spark saved, by batch, change feed,
``storeName`` or ``joinSide``) does not check: the refusals, the CLI options, row checksum
mismatches, and the one read where ckpt answers differently from Spark (join format 4's
``joinSide``)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from ckpt_cli.core.model import Checkpoint
from ckpt_cli.errors import CkptError
from ckpt_cli.replay import read_state
from tests.conftest import CASES_DIR, Case, run_cli
from tests.test_state_vs_spark import _canon, _spark_rows


def _case(name: str) -> Case:
    return Case(name, CASES_DIR / name)


def test_join_side_change_feed_is_refused() -> None:
    ckpt = Checkpoint.open(str(_case("spark4-join").checkpoint))
    with pytest.raises(CkptError, match="change feed"):
        read_state(ckpt, operator=0, join_side="left", change_start_batch=17)


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [({"join_side": "up"}, "left or right"), ({"join_side": "left", "store": "x"}, "not both")],
)
def test_join_side_bad_selection(kwargs: dict[str, Any], problem: str) -> None:
    ckpt = Checkpoint.open(str(_case("spark4-join").checkpoint))
    with pytest.raises(CkptError, match=problem):
        read_state(ckpt, operator=0, **kwargs)


def test_cli_join_side() -> None:
    case = _case("spark4-join")
    read = next(r for r in case.expected["state_reads"] if r.get("join_side") == "right")
    result = run_cli(
        "replay", str(case.checkpoint), "--batch", str(read["batch_id"]), "--join-side", "right",
        "--format", "jsonl",
    )  # fmt: skip
    assert result.exit_code == 0
    ours = [json.loads(line) for line in result.stdout.splitlines() if line]
    assert _canon(ours) == _canon(_spark_rows(case, read))
    bad = run_cli("replay", str(case.checkpoint), "--join-side", "left", "--store", "x")
    assert bad.exit_code == 2
    assert "--join-side or --store" in bad.stderr


def test_cli_join_format_3_store_and_refusal() -> None:
    """``--store`` names a family of a format 3 join; without one: exit 2 listing them."""
    case = _case("spark4-join-v3-rocksdb")
    read = next(r for r in case.expected["state_reads"] if r.get("store_name") and "rows_file" in r)
    result = run_cli(
        "replay", str(case.checkpoint), "--batch", str(read["batch_id"]),
        "--store", read["store_name"], "--format", "jsonl",
    )  # fmt: skip
    assert result.exit_code == 0
    ours = [json.loads(line) for line in result.stdout.splitlines() if line]
    assert _canon(ours) == _canon(_spark_rows(case, read))
    bad = run_cli("replay", str(case.checkpoint))
    assert bad.exit_code == 2
    assert "name one with --store (left-keyToNumValues, " in bad.stderr


def test_hdfs_row_checksum_mismatch_names_file_and_key() -> None:
    """A value whose CRC32C does not match its key and value rows is an error naming the
    file and the key, not a row."""
    from ckpt_cli.core.read import _verified
    from ckpt_cli.formats import compression, records

    case = _case("spark4-dedup-ww-hdfs-checksum")
    path = case.checkpoint / "state/0/0/12.snapshot"
    chunks = compression.decompressed_chunks(str(path), io.BytesIO(path.read_bytes()))
    kv = [(k, v) for k, v in records.iter_kv_records(str(path), chunks, snapshot=True)]
    assert len(list(_verified("12.snapshot", iter(kv)))) == len(kv)  # the real bytes verify
    key, value = next((k, v) for k, v in kv if v is not None)
    broken = [(key, bytes([value[0] ^ 1]) + value[1:])]
    with pytest.raises(CkptError, match=f"12.snapshot: row checksum mismatch for key {key.hex()}"):
        list(_verified("12.snapshot", iter(broken)))


@pytest.mark.parametrize("name", ["spark4-join-v3-rocksdb", "spark4-join-v4-rocksdb"])
@pytest.mark.parametrize(
    ("choice", "problem"),
    [
        ({}, r"keeps its stores as column families of one store: name one with "),
        ({"store": "nope"}, r"no column family 'nope'; the join has: left-"),
    ],
)
def test_join_state_format_3_and_4_need_a_family(
    name: str, choice: dict[str, Any], problem: str
) -> None:
    """As Spark refuses the default store: the error names the operator and its families."""
    with pytest.raises(CkptError, match=r"^state/0: .*" + problem):
        read_state(str(_case(name).checkpoint), operator=0, **choice)


def test_join_state_format_4_join_side_has_the_true_event_time() -> None:
    """Spark 4.3's joinSide rows of format 4 equal ckpt's in everything but the key's
    ``__event_time``: Spark reads it from the bytes after the join key's fixed-length part
    (its reader hands the manager the family's key schema, join key + ``__event_time``, as
    the join key), here the key string's first 8 bytes. ckpt gives the event time the row
    is stored under, as the ``<side>-keyWithTsToValues`` family read has it
    (docs/state-formats.md)."""
    case = _case("spark4-join-v4-rocksdb")
    reads = [r for r in case.expected["state_reads"] if r.get("join_side") and "rows_file" in r]
    assert len(reads) == 6
    for read in reads:
        side, batch = read["join_side"], read["batch_id"]
        ours = list(read_state(str(case.checkpoint), batch=batch, join_side=side))
        spark = _spark_rows(case, read)
        for row in spark:
            # The garbage is exactly the UTF-8 bytes of the one-string join key, read as a
            # little-endian long (an UnsafeRow's variable-length part, zero-padded to 8).
            text = row["key"]["field0"].encode()[:8]
            assert row["key"]["__event_time"] == int.from_bytes(text.ljust(8, b"\0"), "little")
        family = next(
            r
            for r in case.expected["state_reads"]
            if r.get("store_name") == f"{side}-keyWithTsToValues"
            and r["batch_id"] == batch
            and "rows_file" in r
            and "readChangeFeed" not in r["reader_options"]
        )
        stored = _spark_rows(case, family)
        for row in stored:
            del row["value"]["matched"]
        assert _canon(ours) == _canon(stored)
        without_time = [{**r, "key": {"field0": r["key"]["field0"]}} for r in ours]
        assert _canon(without_time) == _canon(
            [{**r, "key": {"field0": r["key"]["field0"]}} for r in spark]
        )
