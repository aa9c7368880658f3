"""PySpark tier: `cleanup --apply` and `repair --apply` killed with SIGKILL at a random point.

After the kill the checkpoint is one `validate` accepts (cleanup) or one the command can undo
byte for byte and then finish (repair); nothing outside the checkpoint root is touched, not
even through a symbolic link inside it; and the real query restarts on the result with the
output (or, after a rollback, the final state) of an untouched run.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.change.lock import LOCK_NAME
from tests.conftest import CASES, run_cli
from tests.fixture_copies import age_everything, truncate_latest_delta
from tests.fixture_queries import recorded_input, restart
from tests.kill_support import kill_mid_command, tree
from tests.spark_support import spark  # noqa: F401 - the session fixture
from tests.test_repair_spark import final_state

pytestmark = pytest.mark.slow

BY_NAME = {c.name: c for c in CASES}


@pytest.mark.parametrize(
    ("name", "seed"),
    [("spark4-hdfs-agg", 1), ("spark4-rocksdb-agg", 2), ("spark4-rocksdb-v2", 3)],
)
def test_killed_cleanup_validates_touches_nothing_outside_and_restarts(
    spark: Any,  # noqa: F811 - the session fixture
    name: str,
    seed: int,
    tmp_path: Path,
) -> None:
    case = BY_NAME[name]
    untouched = tmp_path / "untouched"
    killed = tmp_path / "killed"
    shutil.copytree(case.checkpoint, untouched)
    shutil.copytree(case.checkpoint, killed)
    age_everything(killed)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "1.delta").write_bytes(b"not the checkpoint's")
    (killed / "state/0/0/linked").symlink_to(outside, target_is_directory=True)
    before = tree(outside)

    kill_mid_command(
        ["cleanup", str(killed), "--retain", "1", "--apply", "--yes"], killed, random.Random(seed)
    )

    check = run_cli("validate", str(killed), "--all-versions", "--json")
    assert check.json()["ok"], check.json()["findings"]
    assert tree(outside) == before
    (killed / "state/0/0/linked").unlink()  # the probe, not part of the query's checkpoint
    (killed / LOCK_NAME).unlink(missing_ok=True)  # Spark never reads it; see test_safety
    with recorded_input(case) as input_dir:
        want = restart(spark, case, input_dir, untouched)
        got = restart(spark, case, input_dir, killed)
    assert any(want.values()), "the restarted query emitted nothing: the test would prove nothing"
    assert got == want


@pytest.mark.parametrize("seed", [4, 5])
def test_killed_repair_undoes_byte_for_byte_finishes_and_restarts(
    spark: Any,  # noqa: F811 - the session fixture
    seed: int,
    tmp_path: Path,
) -> None:
    case = BY_NAME["spark4-hdfs-agg"]
    good = tmp_path / "good"
    broken = tmp_path / "work" / "broken"
    shutil.copytree(case.checkpoint, good)
    shutil.copytree(case.checkpoint, broken)
    truncate_latest_delta(broken)  # repair plans a rollback
    neighbour = tmp_path / "work" / "neighbour"  # beside the checkpoint, like the quarantine
    neighbour.mkdir()
    (neighbour / "offsets").write_bytes(b"another query's")
    damaged = tree(broken)

    args = ["repair", str(broken), "--apply", "--yes", "--force"]
    kill_mid_command(args, broken, random.Random(seed))

    # Undo what the killed run did (its manifest is written before the first change).
    manifests = sorted(tmp_path.glob("work/*.ckpt-quarantine/*/manifest.json"))
    for manifest in manifests:
        undone = run_cli(
            "repair", str(broken), "--undo", "--manifest", str(manifest), "--break-lock"
        )
        assert undone.exit_code == 0, undone.stderr
    (broken / LOCK_NAME).unlink(missing_ok=True)  # a kill before any change leaves only it
    assert tree(broken) == damaged
    # ... and finish it.
    done = run_cli("repair", *args[1:], "--break-lock", "--json")
    assert done.exit_code == 0, done.stderr
    assert done.json()["result"]["validation"]["ok"]
    assert tree(neighbour) == {"offsets": b"another query's"}
    with recorded_input(case) as input_dir:
        want = restart(spark, case, input_dir, good)
        got = restart(spark, case, input_dir, broken)
    assert any(want.values()) and any(got.values())
    # After a rollback the re-run batch and the new file are planned as one batch (NOTES.md):
    # the state they leave must be the untouched run's.
    assert final_state(broken) == final_state(good)
