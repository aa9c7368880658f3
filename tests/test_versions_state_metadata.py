"""``ckpt versions`` on every fixture Spark's ``state-metadata`` source read
(``state_metadata`` in expected.json): operators, names, stores, partitions, batch range, and
the state variables each transformWithState case declares."""

from __future__ import annotations

import json

import pytest

from ckpt_cli.core.model import Checkpoint
from ckpt_cli.versions import describe_versions
from tests.conftest import CASES, CASES_DIR, Case, run_cli

# The cases Spark's state-metadata source answered with rows (3.x checkpoints have none).
METADATA_CASES = [
    pytest.param(c, id=c.name)
    for c in CASES
    if isinstance(c.expected.get("state_metadata"), list) and c.expected["state_metadata"]
]


@pytest.mark.parametrize("case", METADATA_CASES)
def test_versions_match_spark_state_metadata(case: Case) -> None:
    report = describe_versions(Checkpoint.open(str(case.checkpoint)))
    ours = sorted(
        (op.id, op.name, store.name, store.num_partitions)
        for op in report.operators
        for store in op.stores
    )
    spark_rows = case.expected["state_metadata"]
    assert ours == sorted(
        (r["operatorId"], r["operatorName"], r["stateStoreName"], r["numPartitions"])
        for r in spark_rows
    )
    # Spark's min/maxBatchId are the commit log's oldest and newest batches.
    commits = report.batches.commits
    assert {(r["minBatchId"], r["maxBatchId"]) for r in spark_rows} == {(commits[0], commits[-1])}


@pytest.mark.parametrize("case", METADATA_CASES)
def test_state_variables_match_spark(case: Case) -> None:
    report = describe_versions(Checkpoint.open(str(case.checkpoint)))
    ours = {op.id: op for op in report.operators}
    for row in case.expected["state_metadata"]:
        props = json.loads(row.get("operatorProperties") or "{}")
        op = ours[row["operatorId"]]
        spark_vars = props.get("stateVariables") or []
        assert sorted((v.name, v.ttl) for v in op.state_variables) == sorted(
            (v["stateName"], v["ttlEnabled"]) for v in spark_vars
        )
        assert op.time_mode == props.get("timeMode")
    for declared in case.expected["operators"]:
        op = ours[declared["id"]]
        if "state_vars" in declared:
            user_vars = {(v.name, v.kind, v.ttl) for v in op.state_variables if v.kind != "timer"}
            assert user_vars == {(v["name"], v["kind"], v["ttl"]) for v in declared["state_vars"]}
            timers = [v.name for v in op.state_variables if v.kind == "timer"]
            want = declared.get("timers")
            assert [t.split("Timers_")[0].lstrip("$") for t in timers] == (
                [{"processing": "proc", "event": "event"}[want]] if want else []
            )
        if op.schema_files or op.state_variables:
            assert all("/_stateSchema/" in f for f in op.schema_files)


@pytest.mark.parametrize(
    ("case", "join_format"),
    [("spark4-join-v2-rocksdb", 2), ("spark4-join-v3-rocksdb", 3), ("spark4-join-v4-rocksdb", 4)],
)
def test_versions_names_the_join_state_format(case: str, join_format: int) -> None:
    result = run_cli("versions", str(CASES_DIR / case / "checkpoint"), "--json")
    assert result.exit_code == 0
    (op,) = result.json()["operators"]
    assert op["name"] == "symmetricHashJoin"
    assert op["join_state_format"] == join_format
    text = run_cli("versions", str(CASES_DIR / case / "checkpoint"))
    assert f"join state format {join_format}" in text.stdout


def test_versions_text_lists_state_variables() -> None:
    text = run_cli("versions", str(CASES_DIR / "spark4-tws-pandas" / "checkpoint")).stdout
    assert "transformWithStateInPandasExec" in text
    assert "cnt (value, TTL)" in " ".join(text.split())
