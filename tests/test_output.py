"""The output layer: every result type has a text rendering, and the exit code comes from the
result alone."""

from __future__ import annotations

from typing import Any

import pytest

from ckpt_cli import exit_codes
from ckpt_cli.cleanup import CleanupPlan, CleanupRun, OrphanScan
from ckpt_cli.cli.output import RENDERERS, exit_code
from ckpt_cli.cli.text import load_all, render_text
from ckpt_cli.inspect import FileReport
from ckpt_cli.repair import RepairPlan, RepairRun, UndoResult
from ckpt_cli.results import Result
from ckpt_cli.validate import ValidationReport
from ckpt_cli.versions import VersionsReport

RESULTS = [
    CleanupPlan,
    CleanupRun,
    OrphanScan,
    FileReport,
    RepairPlan,
    RepairRun,
    UndoResult,
    ValidationReport,
    VersionsReport,
]


@pytest.mark.parametrize("cls", RESULTS, ids=lambda c: c.__name__)
def test_every_result_has_a_text_rendering(cls: type[Result]) -> None:
    load_all()
    assert render_text.dispatch(cls) is not render_text.dispatch(object)


def test_renderers_by_name() -> None:
    assert set(RENDERERS) == {"text", "json", "junit"}


class _Found(Result):
    def __init__(self, ok: bool) -> None:
        self._ok = ok

    @property
    def ok(self) -> bool:
        return self._ok

    def body_json(self) -> dict[str, Any]:
        return {}


def test_exit_code_and_status_come_from_ok() -> None:
    assert exit_code(_Found(True)) == exit_codes.OK and _Found(True).status == "ok"
    assert exit_code(_Found(False)) == exit_codes.PROBLEMS
    assert _Found(False).to_json() == {"status": "problems"}


def test_an_orphan_scan_fails_on_an_unplanned_checkpoint() -> None:
    from ckpt_cli.cleanup import ScanFailure

    scan = OrphanScan([ScanFailure("memory://x", "not a checkpoint")])
    assert not scan.ok
    assert scan.to_json() == {
        "status": "problems",
        "checkpoints": [{"checkpoint": "memory://x", "error": "not a checkpoint"}],
    }
