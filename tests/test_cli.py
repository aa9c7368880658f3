"""CLI contracts: help everywhere, --json everywhere, one-line errors with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.cli import app
from ckpt_cli.formats.compression import compress
from tests.conftest import REPO, run_cli
from tests.tree import commit, offsets, write_tree

COMMANDS = sorted(c.name or "" for c in app.registered_commands)


def test_root_help() -> None:
    result = run_cli("--help")
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_and_a_reference_page(command: str) -> None:
    result = run_cli(command, "--help")
    assert result.exit_code == 0
    assert "--json" in result.stdout
    # The page's usage and options are generated from the CLI (tests/test_docs.py).
    page = REPO / "docs" / "reference" / "commands" / f"{command}.md"
    assert f"<!-- ckpt:command {command} -->" in page.read_text()


def small_checkpoint(root: Path) -> Path:
    files = {"metadata": b'{"id":"q"}'}
    for b in range(3):
        files[f"offsets/{b}"] = offsets(b)
        files[f"commits/{b}"] = commit(b)
        for p in range(2):
            # An empty delta as Spark writes it: an lz4 stream holding the end marker.
            files[f"state/0/{p}/{b + 1}.delta"] = compress(b"\xff\xff\xff\xff", "lz4")
    write_tree(root, files)
    return root


def target(command: str, checkpoint: Path) -> list[str]:
    """The positional arguments of a command run on ``checkpoint``."""
    if command == "inspect":  # inspects one file of the checkpoint
        return ["-c", str(checkpoint), "offsets/2"]
    if command == "repartition":  # a dry run
        return [str(checkpoint), "--partitions", "3"]
    if command == "convert":  # a dry run
        return [str(checkpoint), "--provider", "rocksdb"]
    if command == "relocate":  # a dry run, to a new home beside it
        return [str(checkpoint), str(checkpoint.parent / "relocated")]
    if command == "report":  # writes its page beside the checkpoint, not in the cwd
        return [str(checkpoint), "-o", str(checkpoint.parent / "report.html")]
    return [str(checkpoint)]


# Damage inside a file that `inspect` or `validate` reads is a finding of the report (exit 1,
# see test_inspect.py and test_validate.py), not a failure to run.
FILE_LEVEL = {"broken offsets", "future version", "broken metadata"}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_writes_json(command: str, tmp_path: Path) -> None:
    result = run_cli(command, *target(command, small_checkpoint(tmp_path)), "--json")
    assert result.exit_code in (0, 1), result.stderr
    obj: dict[str, Any] = json.loads(result.stdout)
    assert obj["status"] in ("ok", "problems")


def bad_inputs(tmp_path: Path) -> list[tuple[str, Path, str]]:
    empty = tmp_path / "empty"
    empty.mkdir()
    notckpt = tmp_path / "notckpt"
    write_tree(notckpt, {"data.parquet": b"PAR1"})
    afile = tmp_path / "afile"
    afile.write_text("x")
    broken = small_checkpoint(tmp_path / "broken")
    (broken / "offsets" / "2").write_bytes(b'v1\n{"batchWatermarkMs":0,')
    future = small_checkpoint(tmp_path / "future")
    (future / "offsets" / "2").write_bytes(b"v7\n{}")
    nometa = small_checkpoint(tmp_path / "badmeta")
    (nometa / "metadata").write_bytes(b"not json")
    return [
        ("missing", tmp_path / "missing", "no such file or directory"),
        ("empty", empty, "directory is empty"),
        ("not a checkpoint", notckpt, "not a Spark checkpoint"),
        ("file", afile, "is a file"),
        ("broken offsets", broken, "offsets/2 (line 2): the batch metadata is not valid JSON"),
        (
            "future version",
            future,
            "offsets/2 (line 1): offset log entry version v7 is unsupported",
        ),
        ("broken metadata", nometa, "metadata (line 1): the query metadata is not valid JSON"),
    ]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("json_flag", [False, True])
def test_bad_input_is_one_line_and_exit_2(command: str, json_flag: bool, tmp_path: Path) -> None:
    for label, path, message in bad_inputs(tmp_path):
        if command == "replay" and label == "broken metadata":
            continue  # replay does not read the query id
        # (repair refuses a version it does not read: the generic one-line error below.)
        if command == "repair" and label == "broken offsets":
            # repair plans a fix for a damaged log entry (a rollback): exit 1 with the plan.
            result = run_cli(command, str(path), "--json")
            assert result.exit_code == 1, (label, result.stdout, result.stderr)
            assert "offsets/2" in json.dumps(result.json()["actions"]), label
            continue
        if command in ("inspect", "validate") and label in FILE_LEVEL:
            # validate reports damaged files as findings: exit 1, the file named.
            if command == "validate":
                result = run_cli(command, str(path), "--json")
                assert result.exit_code == 1, (label, result.stdout, result.stderr)
                assert message in json.dumps(result.json()["findings"]), label
            continue
        # relocate copies files as they are; the offsets it reads to judge the query's
        # activity must parse (the generic one-line error below).
        tolerant = ("versions", "batches", "du", "report", "relocate")
        relocate_reads = command == "relocate" and label != "broken metadata"
        if command in tolerant and label in FILE_LEVEL and not relocate_reads:
            # versions and batches describe what they can read: the damaged file is the
            # headline's reason (versions) or its batch's row (batches; no query id read);
            # du reads no file at all; relocate copies files as they are (its copy's
            # validation says what is wrong with them).
            # report: the page shows what validate finds (see test_report.py).
            result = run_cli(command, *target(command, path), "--json")
            assert result.exit_code == 0, (label, result.stdout, result.stderr)
            if command == "versions" or (command == "batches" and label != "broken metadata"):
                assert message in json.dumps(result.json()), label
            continue
        args = [command, *target(command, path)] + (["--json"] if json_flag else [])
        result = run_cli(*args)
        assert result.exit_code == 2, (label, result.stdout, result.stderr)
        first = result.stderr.strip().splitlines()[0]
        assert first.startswith("error: "), (label, result.stderr)
        assert message in first, (label, first)
        assert "Traceback" not in result.stderr
        if json_flag:
            err = json.loads(result.stdout)
            assert err["status"] == "error" and message in err["errors"][0]["message"]
        else:
            assert result.stdout == ""


def test_version_flag() -> None:
    result = run_cli("--version")
    assert result.exit_code == 0 and result.stdout.startswith("ckpt ")


def test_unknown_operator_is_an_error(tmp_path: Path) -> None:
    result = run_cli("versions", str(small_checkpoint(tmp_path)), "--operator", "7")
    assert result.exit_code == 2
    assert "operator 7 has no state (operators: 0)" in result.stderr


def test_bad_storage_option(tmp_path: Path) -> None:
    result = run_cli("versions", str(small_checkpoint(tmp_path)), "-S", "novalue")
    assert result.exit_code == 2 and "expected KEY=VALUE" in result.stderr
