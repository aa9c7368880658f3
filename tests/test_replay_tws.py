"""``read_state`` of transformWithState operators (the Spark 4.3 ``spark4-tws-*`` fixtures):
what test_state_vs_spark does not check (its rows equal every read Spark saved, per state
variable, timers, ``flattenCollectionTypes=false`` and change feed): the refusals, row
checksum mismatches, a store without zips."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from ckpt_cli.errors import CkptError
from ckpt_cli.formats import compression, records, rocksdb_zip
from ckpt_cli.replay import read_state
from tests.conftest import CASES_DIR, Case, run_cli
from tests.test_state_vs_spark import SAVED_READS

TWS_CASES = [
    Case(p.name, p)
    for p in sorted(CASES_DIR.glob("spark4-tws-*"))
    if (p / "expected.json").is_file()
]


def test_every_tws_case_has_reads() -> None:
    """The generic comparison (test_state_vs_spark) covers them all, by state variable,
    timers and flattenCollectionTypes=false."""
    assert {c.name for c in TWS_CASES} == {
        "spark4-tws-pandas",
        "spark4-tws-avro",
        "spark4-tws-checksum",
        "spark4-tws-row",
        "spark4-tws-row-avro",
        "spark4-tws-row-v2",
        # Issue 29: queries whose state changes between restarts (test_state_history.py).
        "spark4-tws-evolve-avro",
        "spark4-tws-evolve-unsaferow",
        "spark4-tws-evolve-nocheck",
        "spark4-tws-vars",
        "spark4-tws-ttl-evolve",
    }
    reads = [read for case, read in SAVED_READS if case.name.startswith("spark4-tws-")]
    assert {r["reader_options"].get("stateVarName") for r in reads} >= {"cnt", "events", None}
    assert any(r["reader_options"].get("readRegisteredTimers") for r in reads)
    assert any(r["reader_options"].get("flattenCollectionTypes") == "false" for r in reads)
    assert len(reads) >= 100


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
        read_state(str(CASES_DIR / "spark4-tws-row/checkpoint"), state_var="$rowCounter_events")


def test_state_var_on_another_operator_is_refused() -> None:
    ckpt_dir = CASES_DIR / "spark4-rocksdb-agg" / "checkpoint"
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
    shutil.copytree(CASES_DIR / "spark4-tws-checksum/checkpoint", copy)
    part = copy / "state/0/0"
    mapping = rocksdb_zip.read_zip("5.zip", (part / "5.zip").read_bytes()).metadata
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
    shutil.copytree(CASES_DIR / "spark4-tws-row/checkpoint", copy)
    for zip_file in (copy / "state/0/0").glob("*.zip"):
        zip_file.unlink()
    with pytest.raises(CkptError, match=r"state/0/0: no \.zip .*\(columnFamilyMapping\)"):
        list(read_state(str(copy), change_start_batch=8, state_var="total", partitions=[0]))


def test_a_scala_operator_name_reads_the_same(tmp_path: Path) -> None:
    """Scala/Java transformWithState records operatorName ``transformWithStateExec`` (PySpark:
    ``transformWithStateInPySparkExec``/``...InPandasExec``); nothing in ckpt goes by the
    name: the state variables come from operator metadata v2's ``stateVariables``."""
    source = CASES_DIR / "spark4-tws-row/checkpoint"
    copy = tmp_path / "checkpoint"
    shutil.copytree(source, copy)
    renamed = 0
    for meta in (copy / "state/0/_metadata/v2").glob("[0-9]*"):
        text = meta.read_text()
        meta.write_text(
            text.replace('"transformWithStateInPySparkExec"', '"transformWithStateExec"')
        )
        meta.with_name(f".{meta.name}.crc").unlink(missing_ok=True)
        renamed += text != meta.read_text()
    assert renamed
    for var in ("total", "events", "buckets"):
        ours = list(read_state(str(copy), batch=11, state_var=var))
        assert ours == list(read_state(str(source), batch=11, state_var=var))
    assert list(read_state(str(copy), batch=11, timers=True))
    versions = run_cli("versions", str(copy), "--json").json()
    assert versions["operators"][0]["name"] == "transformWithStateExec"
    assert {v["name"] for v in versions["operators"][0]["state_variables"]} >= {"total", "events"}
