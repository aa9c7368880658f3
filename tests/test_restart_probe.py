"""``ckpt replay`` agrees with the Spark that wrote a checkpoint, restarting from it.

The 3.3-4.2 fixtures record a restart probe (fixtures/generate.py ``restart_probe``): the
writing Spark restarted a copy of the checkpoint with one more input file and a foreachBatch
sink. What it emitted follows from the state of the last committed batch and that input, so
this checks ckpt's rows against each version's own Spark, also where no statestore source can
read the state (Spark 3.3/3.4 have none; Spark 4.0's format-v2 zips fail in 4.0 and 4.3).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from tests.conftest import CASES, Case, run_cli
from tests.fixture_queries import GEN

PROBED = [
    pytest.param(c, id=c.name)
    for c in CASES
    if "restart_probe" in c.expected and c.name in GEN.CASES_BY_NAME
]


def replay(case: Case, batch: int) -> list[dict[str, Any]]:
    result = run_cli("replay", str(case.checkpoint), "--batch", str(batch), "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines() if line]


def instant(text: str | None) -> dt.datetime | None:
    return None if text is None else dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def canon(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def predicted(case: Case, state: list[dict[str, Any]], extra: list[dict[str, Any]]) -> Any:
    """What the query emits for the extra input, given ckpt's state rows."""
    query = GEN.CASES_BY_NAME[case.name].query
    if query == "agg":  # update mode: the new aggregate of every key in the input
        values = {r["key"]["k"]: dict(r["value"]) for r in state}
        for row in extra:
            v = values.setdefault(row["k"], {"count": 0, "sum": None, "max": None})
            v["count"] += 1
            v["sum"] = (v["sum"] or 0) + row["v"]
            stamps = [t for t in (instant(v["max"]), instant(row["ts"])) if t is not None]
            v["max"] = max(stamps).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        touched = {row["k"] for row in extra}
        return canon(
            [
                {"k": k, "cnt": v["count"], "sum_v": v["sum"], "max_ts": v["max"]}
                for k, v in values.items()
                if k in touched
            ]
        )
    if query == "dedup":  # append mode: the rows whose id the state has not seen
        seen = {r["key"]["id"] for r in state}
        out = []
        for row in extra:
            if row["id"] not in seen:
                seen.add(row["id"])
                ts = instant(row["ts"])
                assert ts is not None
                out.append({**row, "ts": ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")})
        return canon(out)
    pytest.skip(f"no prediction for a {query} query")


@pytest.mark.parametrize("case", PROBED)
def test_restart_output_follows_from_replayed_state(case: Case) -> None:
    probe = case.expected["restart_probe"]
    assert probe["ok"], probe.get("error")
    assert probe["spark_version"] == case.expected["spark_version"]
    latest = max(case.expected["batches_run"])
    emitted = probe["emitted"]
    assert list(emitted) == [str(latest + 1)]
    spec = GEN.CASES_BY_NAME[case.name]
    (extra,) = GEN.input_files(spec, probe["input_step"]).values()
    got = canon(emitted[str(latest + 1)])
    assert got, "the probe emitted nothing: the test would prove nothing"
    assert predicted(case, replay(case, latest), extra) == got
