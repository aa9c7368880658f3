"""PySpark tier: the Spark engine gives the same results as this machine's pools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.cleanup import scan_orphans
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.engine import LocalEngine, SparkEngine
from ckpt_cli.replay import read_state
from ckpt_cli.replay.datasets import write_dataset
from ckpt_cli.storage import Storage
from ckpt_cli.validate import validate
from tests.conftest import CASES, CASES_DIR, Case
from tests.spark_support import spark  # noqa: F401 - the session fixture

pytestmark = pytest.mark.slow


def _report(ckpt_dir: Path, engine: Any) -> dict[str, Any]:
    data = validate(Checkpoint.open(str(ckpt_dir)), all_versions=True, deep=True, engine=engine)
    out = data.to_json()
    out["stats"].pop("seconds")
    return out


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_validate_deep_same_on_spark(spark: Any, case: Case) -> None:  # noqa: F811
    local = _report(case.checkpoint, LocalEngine(2))
    remote = _report(case.checkpoint, SparkEngine(spark))
    assert json.dumps(remote, sort_keys=True) == json.dumps(local, sort_keys=True)


def _dataset(root: Path) -> dict[str, list[str]]:
    return {
        str(p.relative_to(root)): sorted(p.read_text().splitlines())
        for p in sorted(root.rglob("*.jsonl"))
    }


@pytest.mark.parametrize("name", ["spark4-join", "spark4-rocksdb-v2", "spark4-hdfs-agg"])
def test_replay_dataset_same_on_spark(spark: Any, name: str, tmp_path: Path) -> None:  # noqa: F811
    ckpt = Checkpoint.open(str(CASES_DIR / name / "checkpoint"))
    op = next(iter(ckpt.operators.values()))
    rows = read_state(ckpt, operator=op.id, store=next(iter(op.stores)))
    a = write_dataset(rows, str(tmp_path / "local"), "jsonl", engine=LocalEngine(2))
    b = write_dataset(rows, str(tmp_path / "spark"), "jsonl", engine=SparkEngine(spark))
    assert a == b and sum(a.values()) > 0
    assert _dataset(tmp_path / "local") == _dataset(tmp_path / "spark")


def test_orphans_recursive_same_on_spark(spark: Any) -> None:  # noqa: F811
    storage = Storage.from_url(str(CASES_DIR))
    local = scan_orphans(storage, LocalEngine(2), retain=1, min_age=0, now=2e9)
    remote = scan_orphans(storage, SparkEngine(spark), retain=1, min_age=0, now=2e9)
    assert json.dumps(remote.to_json(), sort_keys=True) == json.dumps(
        local.to_json(), sort_keys=True
    )
    assert len(local.checkpoints) == len(CASES)


def _cli_json(*args: str) -> dict[str, Any]:
    from tests.conftest import run_cli

    result = run_cli(*args, "--json")
    assert result.exit_code in (0, 1), result.stderr
    data: dict[str, Any] = result.json()
    return data


def test_cli_engine_spark_equals_local(spark: Any, tmp_path: Path) -> None:  # noqa: F811
    root = str(CASES_DIR / "spark4-rocksdb-v2" / "checkpoint")
    local = _cli_json("validate", root, "--deep", "--all-versions")
    remote = _cli_json("validate", root, "--deep", "--all-versions", "--engine", "spark")
    for report in (local, remote):
        report["stats"].pop("seconds")
    assert remote == local
    a = _cli_json("replay", root, "-O", f"{tmp_path}/a/")
    b = _cli_json("replay", root, "-O", f"{tmp_path}/b/", "--engine", "spark")
    assert a["rows_per_partition"] == b["rows_per_partition"]
    assert _dataset(tmp_path / "a") == _dataset(tmp_path / "b")
    local_scan = _cli_json("orphans", str(CASES_DIR), "--recursive", "--min-age", "0")
    remote_scan = _cli_json(
        "orphans", str(CASES_DIR), "--recursive", "--min-age", "0", "--engine", "spark"
    )
    for scan in (local_scan, remote_scan):
        for plan in scan["checkpoints"]:
            plan.pop("activity", None)  # ages, measured at each run
            plan.pop("query_active", None)
    assert remote_scan == local_scan
