"""PySpark tier: checkpoints broken the way users break them are repaired, and the real query
restarts on them with one more input batch and produces what an undamaged copy produces (for
a rollback: the same final state as re-running the batches)."""

from __future__ import annotations

import json
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CASES, CASES_DIR, Case, run_cli
from tests.fixture_copies import latest, truncate_latest_delta
from tests.fixture_queries import recorded_input, restart
from tests.spark_support import spark  # noqa: F401 - the session fixture

pytestmark = pytest.mark.slow

BY_NAME = {c.name: c for c in CASES}


def remove_needed_delta(root: Path) -> None:
    """A delta the restart needs removed (an older snapshot exists to roll back to)."""
    delta = root / f"state/0/1/{latest(root) + 1}.delta"
    delta.unlink()
    (delta.parent / f".{delta.name}.crc").unlink()


def edit_offsets_by_hand(root: Path) -> None:
    """The latest offsets entry re-saved by an editor: its .crc no longer matches."""
    entry = root / f"offsets/{latest(root)}"
    entry.write_text(entry.read_text().replace('"batchWatermarkMs":', '"batchWatermarkMs": '))


def remove_newest_sst(root: Path) -> None:
    """RocksDB: an SST the latest zip names is lost."""
    zip_path = root / f"state/0/0/{latest(root) + 1}.zip"
    with zipfile.ZipFile(zip_path) as zf:
        meta = json.loads(zf.read("metadata").decode().split("\n", 1)[1])
    sst = max(meta["sstFiles"], key=lambda s: s["localFileName"])["dfsSstFileName"]
    (root / "state/0/0/SSTs" / sst).unlink()
    (root / f"state/0/0/SSTs/.{sst}.crc").unlink(missing_ok=True)


Damage = Callable[[Path], None]
SCENARIOS = [
    ("spark4-hdfs-agg", truncate_latest_delta, True),
    ("spark4-hdfs-agg-zstd", remove_needed_delta, True),
    ("spark4-hdfs-agg", edit_offsets_by_hand, False),
    ("spark4-rocksdb-agg", remove_newest_sst, True),
]


def final_state(root: Path) -> list[str]:
    result = run_cli("replay", str(root), "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    return sorted(result.stdout.splitlines())


@pytest.mark.parametrize(
    ("name", "damage", "rollback"),
    [pytest.param(n, d, r, id=f"{n}-{d.__name__}") for n, d, r in SCENARIOS],
)
def test_repaired_checkpoint_restarts_like_an_undamaged_one(
    spark: Any,  # noqa: F811 - the session fixture
    name: str,
    damage: Damage,
    rollback: bool,
    tmp_path: Path,
) -> None:
    case = BY_NAME[name]
    good = tmp_path / "good"
    broken = tmp_path / "broken"
    shutil.copytree(case.checkpoint, good)
    shutil.copytree(case.checkpoint, broken)
    damage(broken)
    result = run_cli("repair", str(broken), "--apply", "--yes", "--force", "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    report = result.json()
    assert report["result"]["validation"]["ok"]
    assert (report["rollback_to"] is not None) == rollback
    with recorded_input(case) as input_dir:
        want = restart(spark, case, input_dir, good)
        got = restart(spark, case, input_dir, broken)
    assert any(want.values()) and any(got.values())
    if not rollback:
        assert got == want
    # After a rollback the file source plans the re-run batch and the new file as one batch,
    # so batch ids and emitted rows differ; the state they leave must not.
    assert final_state(broken) == final_state(good)


CRASHES = [pytest.param(c, id=c.name) for c in CASES if c.name.startswith("spark4-crash")]


@pytest.mark.parametrize("case", CRASHES)
def test_killed_mid_batch_is_repaired_and_restarts(
    spark: Any,  # noqa: F811 - the session fixture
    case: Case,
    tmp_path: Path,
) -> None:
    untouched = tmp_path / "untouched"
    repaired = tmp_path / "repaired"
    shutil.copytree(case.checkpoint, untouched)
    shutil.copytree(case.checkpoint, repaired)
    result = run_cli("repair", str(repaired), "--apply", "--yes", "--force", "--json")
    assert result.exit_code in (0, 1), result.stderr
    report = result.json()
    if report["actions"]:
        assert report["result"]["validation"]["ok"], report["result"]["validation"]
    with recorded_input(case) as input_dir:
        want = restart(spark, case, input_dir, untouched)
        got = restart(spark, case, input_dir, repaired)
    assert got == want and any(want.values())
    assert final_state(repaired) == final_state(untouched)


def test_scenarios_use_existing_fixtures() -> None:
    for name, _damage, _rollback in SCENARIOS:
        assert (CASES_DIR / name / "checkpoint").is_dir(), name
