"""``ckpt orphans`` / ``cleanup`` on the Spark 4.3 pending fixtures: nothing a retained
version needs (multi-family zips and their SSTs, changelogs v2/v4, ``_stateSchema`` files,
operator metadata v2) is deleted; every retained batch still validates after a real cleanup."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ckpt_cli.cleanup import apply_cleanup, plan_cleanup
from ckpt_cli.model import Checkpoint
from ckpt_cli.validate import validate
from ckpt_cli.validate.codes import FMGWS_V1_SNAPSHOT, INFO
from tests.conftest import CASES_DIR
from tests.fixture_copies import age_everything

PENDING_CASES = sorted(p.name for p in CASES_DIR.iterdir() if (p / "expected.json").is_file())
# Files of the operator itself, never of a version: every one is kept.
OPERATOR_FILES = ("/_stateSchema/", "/_metadata/")


def _problems(ckpt: Checkpoint, **kwargs: object) -> list[str]:
    report = validate(ckpt, **kwargs)  # type: ignore[arg-type]
    # The case Spark cannot restart keeps its one (expected) error. Info findings are normal
    # after a cleanup (a version's uniqueId recorded by a purged commit).
    return [
        f"{f.code}: {f.message}"
        for f in report.findings
        if f.code != FMGWS_V1_SNAPSHOT and f.severity != INFO
    ]


@pytest.mark.parametrize("retain", [1, 2])
@pytest.mark.parametrize("case", PENDING_CASES)
def test_cleanup_keeps_what_retained_versions_need(case: str, retain: int, tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    shutil.copytree(CASES_DIR / case / "checkpoint", root)
    age_everything(root)
    ckpt = Checkpoint.open(str(root))
    latest = ckpt.batches.latest_committed
    assert latest is not None
    plan = plan_cleanup(ckpt, retain=retain, force=False)
    deleted = {d.path for d in plan.deletions}
    assert not [p for p in deleted if any(part in f"/{p}" for part in OPERATOR_FILES)]
    apply_cleanup(ckpt, plan, manifest=str(tmp_path / "manifest.json"))
    after = Checkpoint.open(str(root))
    for path in deleted:
        assert not (root / path).exists()
    for batch in range(latest - retain, latest + 1):
        assert _problems(after, batch=batch) == [], (batch, sorted(deleted))
    assert _problems(after, all_versions=True, deep=True) == []


@pytest.mark.parametrize("case", PENDING_CASES)
def test_orphans_on_the_fixtures_spare_operator_files(case: str) -> None:
    plan = plan_cleanup(Checkpoint.open(str(CASES_DIR / case / "checkpoint")), min_age=0)
    for d in plan.deletions + plan.kept_young + plan.kept:
        assert not any(part in f"/{d.path}" for part in OPERATOR_FILES), d


def test_the_check_sees_a_deleted_retained_zip(tmp_path: Path) -> None:
    """The checks above can fail: a plan that also deletes the newest zip's SSTs is caught."""
    root = tmp_path / "ckpt"
    shutil.copytree(CASES_DIR / "spark4-tws-row" / "checkpoint", root)
    age_everything(root)
    ckpt = Checkpoint.open(str(root))
    plan = plan_cleanup(ckpt, retain=1, force=False)
    assert any(d.path.endswith(".zip") for d in plan.deletions)  # state is cleaned at all
    apply_cleanup(ckpt, plan, manifest=str(tmp_path / "manifest.json"))
    for sst in (root / "state/0/0/SSTs").glob("*.sst"):
        sst.unlink()
    assert _problems(Checkpoint.open(str(root)), all_versions=True)
