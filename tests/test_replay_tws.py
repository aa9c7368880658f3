"""``read_state`` of transformWithState operators (the pending Spark 4.3 fixtures) gives the
rows Spark's ``statestore`` source read: per state variable (``stateVarName``), the
registered timers, ``flattenCollectionTypes=false`` and the change feed, in checkpoint
formats v1 and v2, UnsafeRow and Avro encodings, with and without row checksums."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.errors import CkptError
from ckpt_cli.formats import compression, records, rocksdb
from ckpt_cli.model import Checkpoint
from ckpt_cli.replay import read_state
from tests.conftest import Case, run_cli
from tests.test_state_vs_spark import _canon, _spark_rows

PENDING = Path(__file__).resolve().parent.parent / "fixtures" / "pending"
TWS_CASES = [
    Case(p.name, p) for p in sorted(PENDING.glob("spark4-tws-*")) if (p / "expected.json").is_file()
]
READS = [
    pytest.param(case, read, id=f"{case.name}-{read['rows_file'].rsplit('/', 1)[-1]}")
    for case in TWS_CASES
    for read in case.expected["state_reads"]
    if "error" not in read and "rows_file" in read
]


def test_every_tws_case_has_reads() -> None:
    assert {c.name for c in TWS_CASES} == {
        "spark4-tws-pandas",
        "spark4-tws-avro",
        "spark4-tws-checksum",
        "spark4-tws-row",
        "spark4-tws-row-avro",
        "spark4-tws-row-v2",
    }
    read_cases = {
        case.name
        for case in TWS_CASES
        for read in case.expected["state_reads"]
        if "error" not in read and "rows_file" in read
    }
    assert read_cases == {c.name for c in TWS_CASES}
    assert len(READS) >= 100


def _read(ckpt: Checkpoint, read: dict[str, Any]) -> list[dict[str, Any]]:
    options = read["reader_options"]
    common: dict[str, Any] = {
        "operator": read["operator_id"],
        "state_var": options.get("stateVarName"),
        "timers": options.get("readRegisteredTimers") == "true",
        "flatten": options.get("flattenCollectionTypes") != "false",
    }
    if options.get("readChangeFeed") == "true":
        rows = read_state(
            ckpt,
            change_start_batch=int(options["changeStartBatchId"]),
            change_end_batch=int(options["changeEndBatchId"]),
            **common,
        )
    else:
        rows = read_state(ckpt, batch=int(options["batchId"]), **common)
    return list(rows)


@pytest.mark.parametrize(("case", "read"), READS)
def test_rows_equal_spark_statestore(case: Case, read: dict[str, Any]) -> None:
    ours = _read(Checkpoint.open(str(case.checkpoint)), read)
    spark = _spark_rows(case, read)
    assert len(ours) == read["num_rows"] == len(spark)
    assert _canon(ours) == _canon(spark)


@pytest.mark.parametrize("case", TWS_CASES, ids=lambda c: c.name)
def test_without_a_state_variable_the_read_is_refused_naming_them(case: Case) -> None:
    variables = [v["name"] for v in case.expected["operators"][0]["state_vars"]]
    with pytest.raises(CkptError) as err:
        read_state(str(case.checkpoint), operator=0)
    assert all(v in err.value.message for v in variables)
    result = run_cli("replay", str(case.checkpoint))
    assert result.exit_code == 2
    assert "--state-var NAME" in result.stderr and "Traceback" not in result.stderr


def test_internal_families_are_not_state_variables() -> None:
    with pytest.raises(CkptError, match=r"no state variable '\$rowCounter_events'"):
        read_state(str(PENDING / "spark4-tws-row/checkpoint"), state_var="$rowCounter_events")


def test_state_var_on_another_operator_is_refused() -> None:
    other = Case("", PENDING.parent / "checkpoints").root
    ckpt_dir = next(p / "checkpoint" for p in sorted(other.iterdir()) if "rocksdb" in p.name)
    with pytest.raises(CkptError, match="not a transformWithState operator"):
        read_state(str(ckpt_dir), operator=0, state_var="x")


def _damage_a_put(changelog: Path, family_id: int) -> bytes:
    """Flips a byte of the first put of ``family_id`` in a changelog (re-compressed as it
    was); returns the key."""
    raw = changelog.read_bytes()
    codec = compression.detect_codec(raw[:16])
    assert codec is not None
    data = compression.decompress(changelog.name, raw, codec=codec)
    chunks = compression.decompressed_chunks(changelog.name, io.BytesIO(raw), codec=codec)
    key, value = next(
        (k, v)
        for kind, k, v in records.open_changelog(changelog.name, chunks).records()
        if kind == records.PUT and v is not None and int.from_bytes(k[:2], "little") == family_id
    )
    at = data.index(key + len(value).to_bytes(4, "big") + value) + len(key) + 4 + len(value) - 1
    damaged = data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]
    changelog.write_bytes(compression.compress(damaged, codec))
    return key


def test_a_damaged_row_checksum_is_an_error_naming_the_key(tmp_path: Path) -> None:
    copy = tmp_path / "checkpoint"
    shutil.copytree(PENDING / "spark4-tws-checksum/checkpoint", copy)
    part = copy / "state/0/0"
    mapping = rocksdb.read_zip("5.zip", (part / "5.zip").read_bytes()).metadata
    key = _damage_a_put(part / "6.changelog", mapping.column_family_mapping["cnt"])
    with pytest.raises(CkptError, match=f"row checksum mismatch .* key {key.hex()}"):
        list(read_state(str(copy), batch=5, state_var="cnt", partitions=[0]))
    with pytest.raises(CkptError, match=f"row checksum mismatch .* key {key.hex()}"):
        list(read_state(str(copy), change_start_batch=5, state_var="cnt", partitions=[0]))
    result = run_cli("replay", str(copy), "--state-var", "cnt", "-f", "jsonl")
    assert result.exit_code == 2
    assert "row checksum mismatch" in result.stderr and "Traceback" not in result.stderr


def test_without_a_zip_the_family_ids_are_unknown(tmp_path: Path) -> None:
    copy = tmp_path / "checkpoint"
    shutil.copytree(PENDING / "spark4-tws-row/checkpoint", copy)
    for zip_file in (copy / "state/0/0").glob("*.zip"):
        zip_file.unlink()
    with pytest.raises(CkptError, match=r"state/0/0: no \.zip .*\(columnFamilyMapping\)"):
        list(read_state(str(copy), change_start_batch=8, state_var="total", partitions=[0]))
