"""PySpark tier: a ``repartition --apply`` that dies part way, then finished or undone by ckpt,
gives a checkpoint the real query restarts from as if nothing had happened.

The process dies in the middle of one of its writes after ``offsets/N+1`` and before
``commits/N+1`` (the window where Spark refuses to start the query). ``ckpt validate`` names
the ``UNFINISHED_REPARTITION``; then (a) ``ckpt repartition --apply`` again finishes it, or
(b) ``ckpt repartition --undo`` rolls it back; ``validate`` is clean after either. The fixture's
query, restarted on each and fed two more input files, emits what it emits restarted on an
untouched copy (the finished one a batch later: the repartition batch takes an id).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CASES_DIR, Case, run_cli
from tests.fixture_copies import age_everything
from tests.fixture_queries import recorded_input, restart
from tests.kill_support import die_in_nth_write, tree
from tests.spark_support import spark  # noqa: F401 - the session fixture
from tests.test_repartition_spark import emitted_rows

pytestmark = pytest.mark.slow

# A checkpoint write in the middle of the state files, 2 -> 3 partitions (see
# test_kill_repartition.DEATHS): HDFS partition 1's snapshot checksum; RocksDB format v2
# partition 1's zip checksum.
KILLS = {"spark4-hdfs-agg": 6, "spark4-rocksdb-v2": 12}
APPLY = ("--partitions", "3", "--apply", "-y", "--force")


def killed_copy(case: Case, dest: Path, nth: int) -> None:
    shutil.copytree(case.checkpoint, dest)
    age_everything(dest)
    died = die_in_nth_write(nth, f"{dest}/", ["repartition", str(dest), *APPLY])
    assert died.returncode == 9, died.stderr.decode()


def findings(ckpt: Path) -> list[dict[str, Any]]:
    report = run_cli("validate", str(ckpt), "--json").json()
    found: list[dict[str, Any]] = report["findings"]
    return found


def errors(ckpt: Path) -> list[str]:
    return [f["code"] for f in findings(ckpt) if f["severity"] == "error"]


def shuffle_partitions(ckpt: Path) -> str:
    newest = max(int(p.name) for p in (ckpt / "offsets").iterdir() if p.name.isdigit())
    conf = json.loads((ckpt / "offsets" / str(newest)).read_text().splitlines()[1])["conf"]
    value: str = conf["spark.sql.shuffle.partitions"]
    return value


@pytest.mark.parametrize("name", sorted(KILLS))
def test_killed_repartition_finished_or_undone_restarts_like_an_untouched_copy(
    spark: Any,  # noqa: F811 - the session fixture
    name: str,
    tmp_path: Path,
) -> None:
    case = Case(name, CASES_DIR / name)
    last = max(int(p.name) for p in (case.checkpoint / "commits").iterdir() if p.name.isdigit())
    untouched = tmp_path / "untouched"
    shutil.copytree(case.checkpoint, untouched)
    original = tree(untouched)
    finished, undone = tmp_path / "finished", tmp_path / "undone"
    for ckpt in (finished, undone):
        killed_copy(case, ckpt, KILLS[name])
        # Killed between offsets/N+1 and commits/N+1: Spark would refuse to start.
        assert (ckpt / f"offsets/{last + 1}").is_file()
        assert not (ckpt / f"commits/{last + 1}").exists()
        assert errors(ckpt) == ["UNFINISHED_REPARTITION"]

    again = run_cli("repartition", str(finished), *APPLY, "--break-lock")
    assert again.exit_code == 0, again.stdout + again.stderr
    assert (finished / f"commits/{last + 1}").is_file()
    back = run_cli("repartition", str(undone), "--undo", "--break-lock")
    assert back.exit_code == 0, back.stdout + back.stderr
    assert tree(undone) == original
    for ckpt in (finished, undone):
        assert errors(ckpt) == [], findings(ckpt)

    with recorded_input(case, extra_steps=2) as input_dir:
        want = restart(spark, case, input_dir, untouched)
        got_undone = restart(spark, case, input_dir, undone)
        got_finished = restart(spark, case, input_dir, finished)
    assert any(want.values())
    assert got_undone == want
    # The same rows; one batch id later, taken by the repartition batch.
    assert emitted_rows(got_finished) == emitted_rows(want)
    assert min(got_finished) == min(want) + 1
    assert shuffle_partitions(finished) == "3" and shuffle_partitions(undone) == "2"
