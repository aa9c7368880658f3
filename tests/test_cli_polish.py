"""CLI polish: usage errors in one line (exit 2, a JSON object with --json), one name for the
location argument, examples in every command's help, the version-0 wording, and thousands
separators."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest import CASES_DIR, run_cli
from tests.test_batches import copy_checkpoint

AGG = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"
COMMANDS = (
    "versions",
    "batches",
    "du",
    "validate",
    "replay",
    "orphans",
    "cleanup",
    "repair",
    "report",
)

USAGE_ERRORS = [
    (["versions", "--bogus", str(AGG)], "no such option: --bogus"),
    (["versions"], "missing argument 'CHECKPOINT'"),
    (["du", str(AGG), "--top", "lots"], "invalid value for '--top'"),
    (["du", str(AGG), "--top", "-3"], "invalid value for '--top'"),
    (["nosuch", str(AGG)], "no such command 'nosuch'"),
    (["versions", str(AGG), "extra"], "got unexpected extra argument"),
]


@pytest.mark.parametrize(("args", "problem"), USAGE_ERRORS)
def test_usage_error_is_one_line_and_exit_2(args: list[str], problem: str) -> None:
    result = run_cli(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and problem in line and "--help" in line
    assert "╭" not in result.stderr and "Usage:" not in result.stderr


@pytest.mark.parametrize(("args", "problem"), USAGE_ERRORS[:4])
def test_usage_error_with_json_is_a_json_error_object(args: list[str], problem: str) -> None:
    result = run_cli(*args, "--json")
    assert result.exit_code == 2
    data = json.loads(result.stdout)
    assert data["status"] == "error"
    (error,) = data["errors"]
    assert error["type"] == "USAGE" and problem in error["message"]
    assert len(result.stderr.splitlines()) == 1


def test_usage_error_of_the_installed_command() -> None:
    """The real entry point (not the test runner) goes through the same path."""
    run = subprocess.run(
        [sys.executable, "-m", "ckpt_cli", "du", str(AGG), "--nope", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert json.loads(run.stdout)["status"] == "error"
    assert run.stderr.count("\n") == 1 and "no such option: --nope" in run.stderr


def test_bare_ckpt_still_shows_help() -> None:
    result = run_cli()
    assert "versions" in result.stdout + result.stderr and "error:" not in result.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_names_its_location_checkpoint_and_has_examples(command: str) -> None:
    result = run_cli(command, "--help")
    assert result.exit_code == 0
    text = result.stdout
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    assert "CHECKPOINT" in usage, usage
    assert not re.search(r"\bpath\b|\bPATH\b|CKPT\b", usage)
    assert "Examples" in text
    assert re.search(rf"^\s*ckpt {command} \S", text, re.M), f"no example of ckpt {command}"


def test_inspect_names_file_and_checkpoint() -> None:
    text = run_cli("inspect", "--help").stdout
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    assert "FILE" in usage
    assert re.search(r"--checkpoint, -c CHECKPOINT", text)
    assert "Examples" in text


def test_replay_of_version_0_is_before_the_first_batch() -> None:
    result = run_cli("replay", str(AGG), "--state-version", "0")
    assert result.exit_code == 0, result.stderr
    title = " ".join(result.stdout.split())
    assert "before the first batch (version 0)" in title
    assert "batch -1" not in title


def test_replay_title_names_the_batch_of_a_later_version() -> None:
    result = run_cli("replay", str(AGG))
    match = re.search(r"after batch (\d+) \(version (\d+)\)", " ".join(result.stdout.split()))
    assert match and int(match.group(2)) == int(match.group(1)) + 1


def test_counts_have_thousands_separators(tmp_path: Path) -> None:
    ckpt = copy_checkpoint(tmp_path, AGG)
    for i in range(1200):  # temp files of interrupted writes: counted in versions' headline
        (ckpt / "offsets" / f".{i}.{uuid.uuid4()}.tmp").write_text("")
    text = " ".join(run_cli("versions", str(ckpt)).stdout.split())
    assert "1,200 temp files" in text
