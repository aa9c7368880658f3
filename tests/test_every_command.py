"""Every command, with the options a person types first, on every bundled checkpoint: no
hang, no internal error, one verdict.

Each command runs through the CLI (in this process, under a watchdog that fails the test
with every thread's stack if a run does not end) on a copy of the fixture. The read-only
commands and the dry runs must leave the copy byte for byte as it was; ``replay`` runs in
each output format; the headline's ``restartable`` must be ``validate``'s verdict, and the
report's and ``repair``'s plan must agree with it.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.core.model import Checkpoint
from tests.conftest import CASES, CliResult, replay_args, run_cli

HANG_SECONDS = 120.0
REPLAY_FORMATS = ("jsonl", "csv", "parquet")


def _run(*args: str) -> CliResult:
    """``ckpt ARGS`` under the watchdog; fails on an internal error or a traceback."""
    box: list[CliResult | BaseException] = []

    def target() -> None:
        try:
            box.append(run_cli(*args))
        except BaseException as exc:  # raised again below, in the test's thread
            box.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(HANG_SECONDS)
    if thread.is_alive():
        stacks = "\n".join(
            f"thread {ident}:\n" + "".join(traceback.format_stack(frame))
            for ident, frame in sys._current_frames().items()
        )
        pytest.fail(f"ckpt {' '.join(args)} did not end in {HANG_SECONDS:.0f} s:\n{stacks}")
    result = box[0]
    if isinstance(result, BaseException):
        raise result
    where = f"ckpt {' '.join(args)}"
    assert result.exit_code in (0, 1, 2), (where, result.exit_code, result.stderr)
    assert "internal error" not in result.stderr, (where, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout, (where, result.stderr)
    if result.exit_code == 2:
        # Could not run: one error line naming the problem (and maybe a hint).
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, (where, result.stderr)
    return result


def _tree_hash(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_every_command_finishes_and_agrees(case: Any, tmp_path: Path) -> None:
    root = tmp_path / "checkpoint"
    shutil.copytree(case.checkpoint, root)
    before = _tree_hash(root)
    ckpt = str(root)

    validate = _run("validate", ckpt, "--json")
    verdict = validate.json()
    versions = _run("versions", ckpt, "--json").json()
    head = versions["headline"]
    # One verdict: the headline is validate's, in its default scope, for the same reasons.
    assert head["restartable"] is verdict["ok"], (head, verdict["findings"])
    errors = sorted({f["code"] for f in verdict["findings"] if f["severity"] == "error"})
    assert head["codes"] == errors
    # Human output of the same.
    first = _run("versions", ckpt).stdout.split("\n\n")[0]
    assert ("restartable: yes" in first) is verdict["ok"]

    # The plan of repair agrees: nothing to do exactly when nothing is wrong.
    repair = _run("repair", ckpt, "--json")
    if verdict["ok"]:
        assert repair.json()["actions"] == [] or all(
            a["action"] == "quarantine" for a in repair.json()["actions"]
        )

    report = _run("report", ckpt, "-o", str(tmp_path / "report.html"))
    assert report.exit_code == 0, report.stderr
    assert ("restartable: yes" in report.stdout) is verdict["ok"]

    for args in (
        ("versions", ckpt),
        ("batches", ckpt),
        ("du", ckpt),
        ("validate", ckpt),
        ("orphans", ckpt),
        ("cleanup", ckpt),
        ("repair", ckpt),
        ("repartition", ckpt, "--partitions", "3"),
        ("convert", ckpt, "--provider", "rocksdb"),
        ("convert", ckpt, "--provider", "hdfs"),
        ("inspect", str(root / "metadata")),
    ):
        _run(*args)
    newest = max((p for p in (root / "offsets").iterdir() if p.name.isdigit()), key=_num)
    _run("inspect", str(newest))

    model = Checkpoint.open(ckpt)
    for op in model.operators.values():
        for store in op.stores:
            for read in replay_args(model, op.id, store):
                _run("replay", ckpt, *read)  # the table, on the terminal
                for fmt in REPLAY_FORMATS:
                    out = tmp_path / f"out.{fmt}"
                    result = _run("replay", ckpt, *read, "-f", fmt, "--output", str(out))
                    if result.exit_code == 0:
                        assert out.exists()
                    out.unlink(missing_ok=True)
    assert _tree_hash(root) == before, "a read-only command or a dry run changed the checkpoint"


def _num(p: Path) -> int:
    return int(p.name)
