"""State over time (issue 29): transformWithState queries whose state changed between
restarts, read batch by batch with the operator metadata and schema files in force then.

The fixtures (fixtures/README.md, "State over time"): ``spark4-tws-evolve-avro`` (a value
schema evolved under Avro: a second schema file, value schema id 1), the same evolution
refused under UnsafeRow (``spark4-tws-evolve-unsaferow``) and forced with
``stateSchemaCheck=false`` (``spark4-tws-evolve-nocheck``), ``spark4-tws-vars`` (a
ListState added at one restart, a MapState dropped with ``deleteIfExists`` at the next) and
``spark4-tws-ttl-evolve`` (the same with TTLs, pandas, Avro, and the value schema evolved).
``test_state_vs_spark`` compares every read Spark answered with ckpt's; here: what those
reads must cover, Spark's refusals, the ids values carry, validate and versions.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.core.model import Checkpoint
from ckpt_cli.errors import CkptError
from ckpt_cli.formats import rocksdb_zip
from ckpt_cli.formats.state_schema import parse_state_schema
from ckpt_cli.replay import read_state
from ckpt_cli.state.target import SelectionError
from ckpt_cli.versions import describe_versions
from tests.conftest import CASES, ELSEWHERE, Case, run_cli
from tests.test_state_vs_spark import _canon, _spark_rows, read_like_spark

NAMES = (
    "spark4-tws-evolve-avro",
    "spark4-tws-evolve-unsaferow",
    "spark4-tws-evolve-nocheck",
    "spark4-tws-vars",
    "spark4-tws-ttl-evolve",
)
BY_NAME = {c.name: c for c in CASES if c.name in NAMES}
# Spark's refusal of a variable its batch's operator metadata does not declare.
NOT_DEFINED = "is not defined for the transformWithState operator"


def _case(name: str) -> Case:
    return BY_NAME[name]


def _reads(name: str) -> list[dict[str, Any]]:
    reads: list[dict[str, Any]] = _case(name).expected["state_reads"]
    return reads


def _answered(name: str) -> list[dict[str, Any]]:
    return [r for r in _reads(name) if "rows_file" in r]


def test_the_cases_are_there() -> None:
    assert set(BY_NAME) == set(NAMES)
    for name in NAMES:
        runs = _case(name).expected["runs"]
        assert len(runs) >= 2 and runs[0]["ok"]
    # Avro: two schema files, the second with value schema id 1 for both variables.
    schema_dir = _case("spark4-tws-evolve-avro").checkpoint / "state/0/_stateSchema/default"
    files = sorted((p for p in schema_dir.iterdir() if not p.name.startswith(".")), key=_batch)
    ids = [
        {
            cf.name: cf.value_schema_id
            for cf in parse_state_schema(f.name, f.read_bytes()).column_families
        }
        for f in files
    ]
    assert [i["cnt"] for i in ids] == [0, 1] and [i["seen"] for i in ids] == [0, 1]
    # UnsafeRow: Spark refused the evolution (and left the batch it planned uncommitted).
    refused = _case("spark4-tws-evolve-unsaferow").expected["runs"][1]
    assert not refused["ok"] and "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE" in refused["error"]
    # stateSchemaCheck=false: a restart's operator metadata, but the old schema file only.
    nocheck = _case("spark4-tws-evolve-nocheck").checkpoint / "state/0"
    assert len(list((nocheck / "_metadata/v2").glob("[0-9]*"))) == 2
    assert len(list((nocheck / "_stateSchema/default").glob("[0-9]*"))) == 1
    # Variables: three runs, three operator metadata files.
    meta = _case("spark4-tws-vars").checkpoint / "state/0/_metadata/v2"
    assert sorted(int(p.name) for p in meta.glob("[0-9]*")) == [0, 4, 8]
    meta = _case("spark4-tws-ttl-evolve").checkpoint / "state/0/_metadata/v2"
    assert sorted(int(p.name) for p in meta.glob("[0-9]*")) == [0, 2, 4]


def _batch(path: Path) -> int:
    return int(path.name.split("_")[0])


def test_spark_read_every_batch_with_every_option() -> None:
    """What test_state_vs_spark compares: every committed batch per variable, unflattened,
    change feeds over and across the restarts, snapshot reads, timers."""
    for name in NAMES:
        reads = _answered(name)
        commits = sorted(int(p.name) for p in (_case(name).checkpoint / "commits").glob("[0-9]*"))
        by_batch = {
            r["batch_id"]
            for r in reads
            if set(r["reader_options"]) == {"operatorId", "batchId", "stateVarName"}
        }
        assert by_batch == set(commits), name
        opts = [r["reader_options"] for r in reads]
        assert any(o.get("flattenCollectionTypes") == "false" for o in opts)
        assert any("snapshotStartBatchId" in o for o in opts)
        feeds = [o for o in opts if o.get("readChangeFeed")]
        assert feeds
    # A change feed across the evolution, and across the restart that added hist.
    avro = [r["reader_options"] for r in _answered("spark4-tws-evolve-avro")]
    assert {"0", "5"} <= {o.get("changeStartBatchId") for o in avro} | {
        o.get("changeEndBatchId") for o in avro
    }
    assert any(
        o.get("stateVarName") == "hist" and o.get("changeStartBatchId") == "0"
        for o in (r["reader_options"] for r in _answered("spark4-tws-vars"))
    )
    assert sum(len(_answered(n)) for n in NAMES) >= 180


def _state_args(read: dict[str, Any]) -> list[str]:
    options = read["reader_options"]
    args = ["--state-var", options["stateVarName"]]
    if options.get("readChangeFeed") == "true":
        return [
            *args,
            "--changes",
            "--from",
            options["changeStartBatchId"],
            "--to",
            options["changeEndBatchId"],
        ]
    return [*args, "--batch", options["batchId"]]


REFUSALS: list[tuple[str, dict[str, Any]]] = [
    (name, read)
    for name in NAMES
    for read in (_reads(name) if name in BY_NAME else [])
    if NOT_DEFINED in read.get("error", "")
]
REFUSED = [pytest.param(name, read, id=f"{name}-{i}") for i, (name, read) in enumerate(REFUSALS)]


def test_spark_refused_variables_outside_their_batches() -> None:
    assert len(REFUSALS) >= 16
    names = {(name, read["reader_options"]["stateVarName"]) for name, read in REFUSALS}
    assert names == {
        ("spark4-tws-vars", "hist"),
        ("spark4-tws-vars", "by_bucket"),
        ("spark4-tws-ttl-evolve", "hist"),
        ("spark4-tws-ttl-evolve", "last"),
    }


def _exists(name: str, var: str) -> str:
    """Where the runs that declared ``var`` ran, as ckpt's refusal says it: ``0-3``."""
    runs = _case(name).expected["runs"]
    batches = sorted(
        b for r in runs if any(v["name"] == var for v in r["state_vars"]) for b in r["batches_run"]
    )
    assert batches == list(range(batches[0], batches[-1] + 1))
    return f"it exists at batches {batches[0]}-{batches[-1]}"


@pytest.mark.parametrize(("name", "read"), REFUSED)
def test_a_variable_read_outside_its_batches_is_refused_like_spark(
    name: str, read: dict[str, Any]
) -> None:
    """Spark: ``State variable X is not defined``; ckpt: one line saying where it exists."""
    case = _case(name)
    var = read["reader_options"]["stateVarName"]
    with pytest.raises(SelectionError) as err:
        read_like_spark(Checkpoint.open(str(case.checkpoint)), read)
    message = err.value.message
    assert f"no state variable {var!r} at batch {read['batch_id']}" in message
    assert message.endswith(_exists(name, var)), message
    result = run_cli("replay", str(case.checkpoint), *_state_args(read))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {message}"


def test_ckpt_answers_the_snapshot_reads_spark_fails() -> None:
    """Spark 4.3 fails a snapshot read started before a restart that added families
    (NullPointerException); ckpt's rows of that partition equal Spark's plain read of the
    batch."""
    compared = 0
    for name in NAMES:
        case = _case(name)
        ckpt = Checkpoint.open(str(case.checkpoint))
        answered = {
            (r["batch_id"], r["reader_options"]["stateVarName"]): r
            for r in _answered(name)
            if set(r["reader_options"]) == {"operatorId", "batchId", "stateVarName"}
        }
        for read in _reads(name):
            options = read["reader_options"]
            if "snapshotStartBatchId" not in options or "NullPointerException" not in read.get(
                "error_root_cause", ""
            ):
                continue
            plain = answered.get((read["batch_id"], options["stateVarName"]))
            if plain is None:
                continue
            part = int(options["snapshotPartitionId"])
            ours = read_like_spark(ckpt, read)
            want = [r for r in _spark_rows(case, plain) if r["partition_id"] == part]
            assert _canon(ours) == _canon(want)
            compared += 1
    assert compared >= 6


def _raw_value_ids(case: Case, batch: int, var: str) -> set[str]:
    """The schema ids (``00`` version byte, then 2 bytes LE) of a variable's stored values."""
    rows = read_state(str(case.checkpoint), batch=batch, state_var=var, raw=True)
    return {row["value"][2:6] for row in rows}


def test_values_decode_with_the_schema_id_they_carry() -> None:
    case = _case("spark4-tws-evolve-avro")
    # Before the evolution every value has id 0; after it, the untouched key still does.
    assert _raw_value_ids(case, 2, "cnt") == {"0000"}
    assert _raw_value_ids(case, 5, "cnt") == {"0000", "0100"}
    rows = {
        r["key"]["k"]: r["value"]
        for r in read_state(str(case.checkpoint), batch=5, state_var="cnt")
    }
    # The row written under id 0 comes out in the batch's schema, its new field null.
    assert rows["old"] == {"n": 3, "total": None}
    assert rows["new"]["total"] is not None and rows["both"]["total"] is not None
    before = {
        r["key"]["k"]: r["value"]
        for r in read_state(str(case.checkpoint), batch=2, state_var="cnt")
    }
    assert before["old"] == {"n": 3}  # batch 2 is read with its own schema: no total


def test_an_id_no_schema_file_of_the_batch_names_is_refused(tmp_path: Path) -> None:
    """Operator metadata naming only the newest schema file: a value written under id 0
    cannot be decoded, and says so (never decoded with the wrong schema)."""
    root = tmp_path / "checkpoint"
    shutil.copytree(_case("spark4-tws-evolve-avro").checkpoint, root)
    meta = root / "state/0/_metadata/v2/3"
    header, body = meta.read_text().split("\n", 1)
    obj = json.loads(body)
    paths = obj["stateStoreInfo"][0]["stateSchemaFilePaths"]
    obj["stateStoreInfo"][0]["stateSchemaFilePaths"] = paths[-1:]
    meta.write_text(header + "\n" + json.dumps(obj))
    meta.with_name(".3.crc").unlink()
    with pytest.raises(CkptError, match="written with schema id 0, which no state schema file"):
        list(read_state(str(root), batch=5, state_var="cnt"))
    result = run_cli("replay", str(root), "--batch", "5", "--state-var", "cnt")
    assert result.exit_code == 2 and "Traceback" not in result.stderr


def test_a_put_list_is_one_update_then_appends_in_the_change_feed() -> None:
    """hist is replaced with put: Spark labels the first element of the put ``update`` and
    each further one ``append``; ckpt's change feed is the same."""
    case = _case("spark4-tws-vars")
    read = next(
        r
        for r in _answered("spark4-tws-vars")
        if r["reader_options"].get("stateVarName") == "hist"
        and r["reader_options"].get("readChangeFeed")
        and r["reader_options"]["changeStartBatchId"] == "4"
        and r["reader_options"]["changeEndBatchId"] == "11"
    )
    spark = _spark_rows(case, read)
    labels: dict[tuple[int, int, str], list[str]] = {}
    for row in spark:
        labels.setdefault((row["batch_id"], row["partition_id"], row["key"]["k"]), []).append(
            row["change_type"]
        )
    assert any(sorted(v) == ["append", "append", "update"] for v in labels.values())
    ours = read_like_spark(Checkpoint.open(str(case.checkpoint)), read)
    assert _canon(ours) == _canon(spark)


def _findings(root: Path, *args: str) -> list[dict[str, Any]]:
    result = run_cli("validate", str(root), "--json", *args)
    assert result.exit_code in (0, 1), result.stderr
    found: list[dict[str, Any]] = result.json()["findings"]
    return found


def test_validate_accepts_families_a_restart_added_or_dropped() -> None:
    found = _findings(_case("spark4-tws-vars").checkpoint, "--all-versions", "--deep")
    # The copy's home aside (conftest.ELSEWHERE): no family mismatch.
    assert [f for f in found if f["severity"] != "info" and f["code"] != ELSEWHERE] == []


def test_validate_accepts_the_ttl_index_deleteifexists_leaves() -> None:
    """deleteIfExists drops a TTL variable's own family, not its TTL index: ``$ttl_last``
    stays in the zips of the batches after the restart that dropped ``last``. A family of a
    schema file the metadata names (an earlier run's) is no mismatch."""
    root = _case("spark4-tws-ttl-evolve").checkpoint
    for part in (0, 1):
        newest = max((root / f"state/0/{part}").glob("*.zip"), key=lambda p: int(p.stem))
        mapping = rocksdb_zip.read_zip(newest.name, newest.read_bytes()).metadata
        assert "$ttl_last" in mapping.column_family_mapping
        assert "last" not in mapping.column_family_mapping
    found = _findings(root, "--all-versions", "--deep")
    assert [f for f in found if f["severity"] != "info" and f["code"] != ELSEWHERE] == []


def test_validate_reports_families_no_metadata_of_their_batch_explains(tmp_path: Path) -> None:
    """Without ``_metadata/v2/8`` (the restart that dropped by_bucket), batches 8-11 are read
    with ``_metadata/v2/4``, whose schema has by_bucket: the zips of those batches lack it."""
    root = tmp_path / "checkpoint"
    shutil.copytree(_case("spark4-tws-vars").checkpoint, root)
    (root / "state/0/_metadata/v2/8").unlink()
    (root / "state/0/_metadata/v2/.8.crc").unlink()
    found = [f for f in _findings(root, "--all-versions") if f["code"] == "SCHEMA_FAMILY_MISMATCH"]
    zips = sorted(f["paths"][0] for f in found)
    assert zips == [f"state/0/{p}/{v}.zip" for p in (0, 1) for v in (11, 9)]
    for f in found:
        assert "column families by_bucket are not in state/0/" in f["message"]
        assert "by state/0/_metadata/v2/4" in f["message"]


def test_versions_shows_which_batches_ran_under_which_state() -> None:
    report = describe_versions(Checkpoint.open(str(_case("spark4-tws-vars").checkpoint)))
    (op,) = report.operators
    spans = [(e.first_batch, e.last_batch) for e in op.state_history]
    assert spans == [(0, 3), (4, 7), (8, 11)]
    variables = [
        sorted(v.name for v in e.state_variables if v.kind != "timer") for e in op.state_history
    ]
    assert variables == [["by_bucket", "cnt"], ["by_bucket", "cnt", "hist"], ["cnt", "hist"]]
    assert [e.metadata_file for e in op.state_history] == [
        f"state/0/_metadata/v2/{b}" for b in (0, 4, 8)
    ]
    avro = run_cli("versions", str(_case("spark4-tws-evolve-avro").checkpoint), "--json").json()
    history = avro["operators"][0]["state_history"]
    assert [h["schema_ids"]["default"]["cnt"] for h in history] == [[0, 0], [0, 1]]
    assert [(h["first_batch"], h["last_batch"]) for h in history] == [(0, 2), (3, 5)]
    assert history[1]["schema_files"]["default"].startswith("state/0/_stateSchema/default/3_")
    text = run_cli("versions", str(_case("spark4-tws-evolve-avro").checkpoint)).stdout
    assert "batches 0-2: state/0/_metadata/v2/0" in text
    assert "cnt (value, value schema 1)" in " ".join(text.split())


def test_deep_names_rows_written_under_another_schema() -> None:
    """stateSchemaCheck=false: run 2 wrote cnt and seen with a field more, and Spark kept the
    old schema file. --deep names the keys whose rows do not fit it (not ``old``, written
    before the restart)."""
    found = [
        f
        for f in _findings(_case("spark4-tws-evolve-nocheck").checkpoint, "--deep")
        if f["code"] == "ROW_LAYOUT_MISMATCH"
    ]
    assert {f["severity"] for f in found} == {"warning"}
    assert sorted(f["message"].split(" rows of state variable ")[1].split()[0] for f in found) == [
        "cnt",
        "seen",
    ]
    for f in found:
        assert f["paths"] == ["state/0/1"]
        assert '{"k": "both"}' in f["message"] and '{"k": "new"}' in f["message"]
        assert '"old"' not in f["message"]
        assert "24 bytes where the schema's 1 fields take 16" in f["message"]
    for name in ("spark4-tws-evolve-unsaferow", "spark4-tws-vars"):
        codes = {f["code"] for f in _findings(_case(name).checkpoint, "--deep")}
        assert "ROW_LAYOUT_MISMATCH" not in codes


ARROW_READS = [
    pytest.param(name, read, id=f"{name}-{read['rows_file'].rsplit('/', 1)[-1]}")
    for name in NAMES
    for read in (_answered(name) if name in BY_NAME else [])
    if "snapshotStartBatchId" not in read["reader_options"]
    and "stateVarName" in read["reader_options"]
]


@pytest.mark.parametrize(("name", "read"), ARROW_READS)
def test_to_arrow_has_the_rows(name: str, read: dict[str, Any]) -> None:
    """``to_arrow()`` (one Arrow schema over rows of several schema ids) holds the rows."""
    pytest.importorskip("pyarrow")
    case = _case(name)
    rows = read_like_spark(Checkpoint.open(str(case.checkpoint)), read)
    options = read["reader_options"]
    kwargs: dict[str, Any] = {
        "state_var": options["stateVarName"],
        "flatten": options.get("flattenCollectionTypes") != "false",
    }
    if options.get("readChangeFeed") == "true":
        kwargs["change_start_batch"] = int(options["changeStartBatchId"])
        kwargs["change_end_batch"] = int(options["changeEndBatchId"])
    else:
        kwargs["batch"] = read["batch_id"]
    table = read_state(str(case.checkpoint), **kwargs).to_arrow()
    assert _canon(table.to_pylist(maps_as_pydicts="strict")) == _canon(rows)


def test_arrow_batches_share_the_batchs_schema(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Arrow batches of one row each: the row written under schema id 0 (``total`` null) and
    those under id 1 get one schema, the batch's, in ``to_arrow()`` and in parquet."""
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from ckpt_cli.state import decoders as rows_module

    monkeypatch.setattr(rows_module, "ARROW_BATCH_ROWS", 1)
    case = _case("spark4-tws-evolve-avro")
    table = read_state(str(case.checkpoint), batch=5, state_var="cnt").to_arrow()
    assert str(table.schema.field("value").type) == "struct<n: int64, total: int64>"
    assert sorted(r["value"]["total"] or 0 for r in table.to_pylist()) == [0, 120, 123]
    out = tmp_path / "cnt.parquet"
    args = ["--batch", "5", "--state-var", "cnt", "-f", "parquet", "-o", str(out)]
    result = run_cli("replay", str(case.checkpoint), *args)
    assert result.exit_code == 0, result.stderr
    assert pq.read_table(out).to_pylist() == table.to_pylist()


def test_row_layouts_of_real_rows() -> None:
    """Run 2 of spark4-tws-evolve-nocheck stored cnt as (n, total): its rows fit a schema of
    two longs, are longer than one of one long (what Spark's reader uses) and shorter than
    one of three (the case of Spark's query reading run 1's rows under run 2's schema)."""
    from ckpt_cli.formats.spark_types import LONG, StructField, StructType
    from ckpt_cli.formats.unsaferow import row_layout_problem

    case = _case("spark4-tws-evolve-nocheck")
    rows = read_state(str(case.checkpoint), batch=5, state_var="cnt", raw=True)
    values = {row["key"]: bytes.fromhex(row["value"])[1:] for row in rows}  # no version byte
    sizes = sorted(len(v) for v in values.values())
    assert sizes == [16, 24, 24]  # "old" from run 1, "both" and "new" from run 2

    def longs(n: int) -> StructType:
        return StructType(tuple(StructField(f"c{i}", LONG) for i in range(n)))

    def size(n: int) -> int:  # null bits, then a slot per field
        return 8 * ((n + 63) // 64) + 8 * n

    for value in values.values():
        fields = (len(value) - 8) // 8
        assert row_layout_problem(longs(fields), value) is None
        assert row_layout_problem(longs(fields - 1), value) == (
            f"{len(value)} bytes where the schema's {fields - 1} fields take {size(fields - 1)}"
        )
        assert row_layout_problem(longs(fields + 1), value) == (
            f"{len(value)} bytes, shorter than the {size(fields + 1)} the schema's "
            f"{fields + 1} fields take"
        )
