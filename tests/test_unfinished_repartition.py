"""A state repartition Spark left unfinished (fixtures/unfinished/, made by
fixtures/generate_unfinished.py): validate names it where Spark refuses to start, repair rolls
it back and undo puts it back. The slow tests restart the real query."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.core.model import Checkpoint
from ckpt_cli.core.unfinished import find_unfinished_repartition
from ckpt_cli.repair import plan_repair
from ckpt_cli.validate import validate
from tests.conftest import CASES_DIR, REPO, Case, run_cli
from tests.fixture_copies import age_everything
from tests.fixture_queries import recorded_input, restart
from tests.kill_support import tree
from tests.spark_support import spark  # noqa: F401 - the session fixture

UNFINISHED = REPO / "fixtures" / "unfinished"
NAMES = sorted(p.name for p in UNFINISHED.iterdir()) if UNFINISHED.is_dir() else []
pytestmark = pytest.mark.skipif(not NAMES, reason="no unfinished-repartition fixtures")


def _generator() -> Any:
    path = REPO / "fixtures" / "generate_unfinished.py"
    spec = importlib.util.spec_from_file_location("generate_unfinished", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["generate_unfinished"] = module
    spec.loader.exec_module(module)
    return module


GEN = _generator()


def expected(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((UNFINISHED / name / "expected.json").read_text())
    return data


def base_case(name: str) -> Case:
    base = expected(name)["base"]
    return Case(base, CASES_DIR / base)


def unfinished(name: str, dest: Path) -> Path:
    root: Path = GEN.materialize(UNFINISHED / name, base_case(name).checkpoint, dest)
    age_everything(root)
    return root


def codes(root: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for f in validate(Checkpoint.open(str(root))).to_json()["findings"]:
        out.setdefault(f["code"], []).append(f)
    return out


def rewrite_partitions(entry: Path, count: int) -> None:
    """An offsets entry edited to pin another partition count (its .crc dropped)."""
    text = entry.read_text()
    old = json.loads(text.splitlines()[1])["conf"]["spark.sql.shuffle.partitions"]
    key = '"spark.sql.shuffle.partitions":'
    entry.write_text(text.replace(f'{key}"{old}"', f'{key}"{count}"'))
    (entry.parent / f".{entry.name}.crc").unlink(missing_ok=True)


@pytest.mark.parametrize("name", NAMES)
def test_fixture_records_sparks_refusal(name: str) -> None:
    exp = expected(name)
    assert "STREAMING_UNFINISHED_REPARTITION_DETECTED" in exp["restart"]["error"]
    assert f"offsets/{exp['batch']}" in exp["added"]


@pytest.mark.parametrize("name", NAMES)
def test_validate_names_the_unfinished_repartition(name: str, tmp_path: Path) -> None:
    exp = expected(name)
    root = unfinished(name, tmp_path / "ckpt")
    found = codes(root)
    (finding,) = found.pop("UNFINISHED_REPARTITION")
    assert finding["severity"] == "error"
    assert finding["paths"] == [f"offsets/{exp['batch']}"]
    details = finding.get("details", finding)
    assert (details["from_partitions"], details["to_partitions"]) == (2, 3)
    assert details["last_committed"] == exp["last_committed"]
    # The files the attempt wrote, by content: every added state file, no base file.
    added_state = {p for p in exp["added"] if p.startswith("state/") and "/." not in p}
    assert set(details["written"]) == added_state
    # The old layout is what a restart loads: no noise about the new one, and the batch is
    # not one Spark re-runs.
    assert not {"PARTITION_COUNT_MISMATCH", "MISSING_STATE_FILE", "UNCOMMITTED_BATCH"} & set(found)
    assert all(f["severity"] != "error" for fs in found.values() for f in fs)
    result = run_cli("validate", str(root))
    assert result.exit_code == 1 and "UNFINISHED_REPARTITION" in result.stdout


def test_not_named_where_spark_starts(tmp_path: Path) -> None:
    """Spark's rule: only an uncommitted latest batch whose count differs from the one before."""
    name = "spark4-hdfs-agg-to3"
    batch = expected(name)["batch"]
    # The same count: an ordinary batch in flight (Spark re-runs it).
    same = unfinished(name, tmp_path / "same")
    rewrite_partitions(same / f"offsets/{batch}", 2)
    assert find_unfinished_repartition(Checkpoint.open(str(same))) is None
    assert "UNCOMMITTED_BATCH" in codes(same)
    # Committed: a finished repartition is not flagged by this check.
    done = unfinished(name, tmp_path / "done")
    shutil.copyfile(done / f"commits/{batch - 1}", done / f"commits/{batch}")
    assert find_unfinished_repartition(Checkpoint.open(str(done))) is None
    # The untouched base fixture.
    assert "UNFINISHED_REPARTITION" not in codes(base_case(name).checkpoint)


def test_a_decrease_is_named_too(tmp_path: Path) -> None:
    name = "spark4-hdfs-agg-to3"
    root = unfinished(name, tmp_path / "ckpt")
    rewrite_partitions(root / f"offsets/{expected(name)['batch']}", 1)
    found = codes(root)
    (finding,) = found["UNFINISHED_REPARTITION"]
    assert "from 2 to 1" in finding["message"]
    assert "PARTITION_COUNT_MISMATCH" not in found


@pytest.mark.parametrize("name", NAMES)
def test_repair_rolls_it_back_and_undo_restores_it(name: str, tmp_path: Path) -> None:
    exp = expected(name)
    root = unfinished(name, tmp_path / "ckpt")
    before = tree(root)
    plan = plan_repair(Checkpoint.open(str(root)))
    assert not plan.refused and plan.rollback_to == exp["last_committed"]
    quarantined = {a.path for a in plan.actions if a.kind == "quarantine"}
    # Exactly what the attempt added: the base fixture's files all stay.
    assert quarantined == set(exp["added"])
    assert not any("re-runs the batches" in n for n in plan.notes)
    result = run_cli("repair", str(root), "--apply", "--yes", "--force", "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    report = result.json()
    assert report["result"]["validation"]["ok"]
    base = tree(base_case(name).checkpoint)
    assert {p: h for p, h in tree(root).items() if p in base} == base
    assert not set(tree(root)) - set(base)
    undo = run_cli("repair", str(root), "--undo", "--yes")
    assert undo.exit_code == 0, undo.stdout + undo.stderr
    assert tree(root) == before


# -- PySpark tier ----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_spark_refuses_it_and_starts_after_repair(
    spark: Any,  # noqa: F811 - the session fixture
    name: str,
    tmp_path: Path,
) -> None:
    case = base_case(name)
    untouched = tmp_path / "untouched"
    shutil.copytree(case.checkpoint, untouched)
    root = unfinished(name, tmp_path / "ckpt")
    # Only offsets/N+1 is left of the HDFS attempt: after repair the checkpoint is the base
    # fixture byte for byte (the fast test), so one run on it is enough there.
    compare = bool(expected(name)["removed_by_script"])
    with recorded_input(case) as input_dir:
        with pytest.raises(Exception, match="STREAMING_UNFINISHED_REPARTITION_DETECTED"):
            restart(spark, case, input_dir, root)
        result = run_cli("repair", str(root), "--apply", "--yes", "--force", "--json")
        assert result.exit_code == 0, result.stdout + result.stderr
        got = restart(spark, case, input_dir, root)
        want = restart(spark, case, input_dir, untouched) if compare else got
    assert got == want and any(want.values())
