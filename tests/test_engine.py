"""The local engine's dataset output and recursive orphan scans (fast tier)."""

from __future__ import annotations

import json
import time
from functools import partial
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


def _setup(delay: float) -> None:
    global _DELAY
    _DELAY = delay


_DELAY = 0.0


def _work(unit: int) -> int:
    """Slow on every seventh unit; unit 13 fails with an error of its own."""
    if unit % 7 == 3:
        time.sleep(_DELAY)
    if unit == 13:
        raise CkptError(f"state/0/{unit}: unit {unit} failed")
    return unit * unit


@pytest.mark.parametrize("workers", [1, 2, 4])
@pytest.mark.parametrize("units", [1, 2, 13, 200, 400])
def test_tasks_finish_in_order_and_a_failing_unit_names_itself(workers: int, units: int) -> None:
    """``Engine.tasks`` (the rounds of convert and repartition on an engine): every pool
    size and unit count (partitions 1-400), slow units mixed in, results in unit order; a
    failing unit stops the round with its own one-line error, and the progress closes."""
    engine = LocalEngine(workers)
    done = [u for u in range(units) if u != 13]
    progress = _Progress()
    assert engine.tasks("Round", _work, done, partial(_setup, 0.01), progress) == [
        u * u for u in done
    ]
    assert progress.started == ("Round", len(done)) and progress.closed
    if units > 13:
        failing = _Progress()
        with pytest.raises(CkptError) as failed:
            engine.tasks("Round", _work, list(range(units)), partial(_setup, 0.01), failing)
        assert failed.value.message == "state/0/13: unit 13 failed"
        assert "\n" not in str(failed.value) and failing.closed


class _Progress:
    def __init__(self) -> None:
        self.started: tuple[str, int | None] | None = None
        self.closed = False

    def start(self, description: str, total: int | None = None) -> None:
        self.started = (description, total)

    def advance(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        self.closed = True


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
