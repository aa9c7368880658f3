"""The local engine's dataset output and recursive orphan scans (fast tier)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckpt_cli.engine import LocalEngine, make_engine
from ckpt_cli.errors import CkptError
from tests.conftest import CASES, CASES_DIR, run_cli

pytestmark = pytest.mark.skipif(not CASES, reason="no fixtures")

JOIN = CASES_DIR / "spark4-join" / "checkpoint"


def test_local_engine_keeps_order() -> None:
    units = list(range(50))
    assert LocalEngine(4).map(str, units) == [str(u) for u in units]
    assert LocalEngine(2).map(abs, units, cpu_bound=True) == units


def test_unknown_engine() -> None:
    with pytest.raises(CkptError, match="engine=yarn"):
        make_engine("yarn")


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_replay_to_dataset_equals_stdout(fmt: str, tmp_path: Path) -> None:
    args = ["replay", str(JOIN), "--store", "left-keyWithIndexToValue"]
    stdout = run_cli(*args, "--format", "jsonl")
    want = sorted(json.dumps(json.loads(x), sort_keys=True) for x in stdout.stdout.splitlines())
    result = run_cli(*args, "--format", fmt, "-O", f"{tmp_path}/out/", "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["rows"] == len(want)
    got: list[str] = []
    for part_dir in sorted((tmp_path / "out").iterdir()):
        pid = int(part_dir.name.split("=")[1])
        if fmt == "jsonl":
            rows = [json.loads(x) for x in (part_dir / "part-00000.jsonl").read_text().splitlines()]
        else:
            pq = pytest.importorskip("pyarrow.parquet")
            rows = pq.read_table(part_dir / "part-00000.parquet").to_pylist()
            for row in rows:
                row["partition_id"] = pid
        got += [json.dumps(r, sort_keys=True) for r in rows]
    assert sorted(got) == want


def test_orphans_recursive_finds_every_checkpoint() -> None:
    result = run_cli("orphans", str(CASES_DIR), "--recursive", "--min-age", "0", "--json")
    assert result.exit_code == 1
    scanned = {Path(p["checkpoint"]).parent.name for p in result.json()["checkpoints"]}
    assert scanned == {c.name for c in CASES}


def test_orphans_recursive_on_an_empty_prefix(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("not a checkpoint")
    result = run_cli("orphans", str(tmp_path), "--recursive")
    assert result.exit_code == 2 and "no checkpoint under this prefix" in result.stderr
