"""One meaning per flag (issue 33): each spelling means the same on every command, the old
spellings that clash say what they are now in one line (exit 2), and ``--undo`` is given
the same way to every command that changes a checkpoint."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer.main

import ckpt_cli
from ckpt_cli.change.undo import undo_repair
from ckpt_cli.cli import app
from ckpt_cli.errors import CkptError
from ckpt_cli.repartition.run import undo_repartition
from ckpt_cli.storage import Storage
from tests.conftest import CASES_DIR, run_cli
from tests.fixture_copies import age_everything, truncate_latest_delta

HDFS = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"


def one_line(result: object) -> str:
    """The single error line of a usage error (exit 2)."""
    assert getattr(result, "exit_code") == 2, getattr(result, "stdout")  # noqa: B009
    lines = getattr(result, "stderr").splitlines()  # noqa: B009
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return str(lines[0])


# -- every spelling, one meaning --------------------------------------------------------------


def test_each_option_means_one_thing_on_every_command() -> None:
    commands = {}  # every command, a group's (ckpt state delete) by "<group> <command>"
    for name, command in typer.main.get_command(app).commands.items():  # type: ignore[attr-defined]
        for sub, inner in (getattr(command, "commands", None) or {"": command}).items():
            commands[f"{name} {sub}".strip()] = inner
    meaning: dict[str, set[str]] = {}
    flags: dict[str, set[bool]] = {}
    with_storage = set()
    for name, command in commands.items():
        for param in command.params:
            for opt in [*param.opts, *param.secondary_opts]:
                meaning.setdefault(opt, set()).add(param.name)
                flags.setdefault(opt, set()).add(bool(getattr(param, "is_flag", False)))
            if "--storage-option" in param.opts:
                with_storage.add(name)
    for opt in ("-o", "-O", "-S", "-p", "--output", "--output-dir", "--partition", "--partitions"):
        assert len(meaning[opt]) == 1, (opt, meaning[opt])
    assert meaning["-S"] == {"storage_option"} and meaning["-o"] == {"output"}
    assert meaning["-O"] == {"output_dir"} and meaning["-p"] == {"partition"}
    assert "--version" not in meaning  # the tool's, on the root command only
    assert meaning["--state-version"] == {"state_version"}
    assert flags["--undo"] == {True}  # a flag wherever it is, never a path
    assert with_storage == set(commands)


# -- the old spellings -------------------------------------------------------------------------


def test_o_for_storage_options_names_s() -> None:
    line = one_line(run_cli("versions", str(HDFS), "-o", "secret=hunter2"))
    assert "-o is the output file" in line and "-S/--storage-option KEY=VALUE" in line
    assert "hunter2" not in line  # a storage option's value may be a secret
    # Where -o is the output file, a KEY=VALUE given to it is taken for the old spelling.
    for command in (["replay"], ["report"], ["state", "delete"]):
        line = one_line(run_cli(*command, str(HDFS), "-o", "endpoint_url=http://x:9000"))
        assert "-S/--storage-option" in line and "./endpoint_url=" in line
    # The JSON error object too.
    doc = run_cli("versions", str(HDFS), "-o", "anon=true", "--json")
    assert doc.exit_code == 2 and "-S/--storage-option" in doc.json()["errors"][0]["message"]


def test_o_dash_is_stdout_or_refused_never_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """-o has one meaning: a file, or with "-" stdout where a command can write there."""
    monkeypatch.chdir(tmp_path)
    rows = run_cli("replay", str(HDFS), "-o", "-")
    assert rows.exit_code == 0 and rows.stdout.startswith('{"partition_id":')
    for command in (["report"], ["state", "delete"]):
        line = one_line(run_cli(*command, str(HDFS), "-o", "-"))
        assert "writes a file, not stdout" in line and "-o ./-" in line
    assert list(tmp_path.iterdir()) == []


def test_p_for_the_partition_count_names_partitions() -> None:
    for given in (("-p", "3"), ("-p3",)):
        line = one_line(run_cli("repartition", str(HDFS), *given))
        assert "did you mean --partitions 3? (-p filters partitions)" in line


def test_replay_version_names_state_version() -> None:
    for given in (("--version", "4"), ("--version=4",)):
        line = one_line(run_cli("replay", str(HDFS), *given))
        assert "did you mean --state-version 4?" in line
    ok = run_cli("replay", str(HDFS), "--state-version", "9", "--json")
    assert ok.exit_code == 0 and ok.json()["target"]["version"] == 9


def test_replay_outputs(tmp_path: Path) -> None:
    line = one_line(run_cli("replay", str(HDFS), "--output", f"{tmp_path}/"))
    assert "did you mean -O/--output-dir" in line
    line = one_line(run_cli("replay", str(HDFS), "-o", str(tmp_path)))  # an existing directory
    assert "did you mean -O/--output-dir" in line
    line = one_line(run_cli("replay", str(HDFS), "-O", str(tmp_path / "rows.jsonl")))
    assert f"did you mean -o/--output {tmp_path / 'rows.jsonl'}" in line
    assert "--engine spark writes a dataset: give -O/--output-dir DIR" in one_line(
        run_cli("replay", str(HDFS), "--engine", "spark")
    )
    # Each as it is meant: a file, and a dataset of one folder per partition.
    assert (
        run_cli("replay", str(HDFS), "-f", "jsonl", "-o", str(tmp_path / "r.jsonl")).exit_code == 0
    )
    assert (tmp_path / "r.jsonl").read_text().count("\n") > 0
    assert run_cli("replay", str(HDFS), "-O", str(tmp_path / "set")).exit_code == 0
    assert sorted(p.name for p in (tmp_path / "set").iterdir()) == [
        "partition_id=0",
        "partition_id=1",
    ]


def test_cleanup_has_no_undo() -> None:
    line = one_line(run_cli("cleanup", str(HDFS), "--undo"))
    assert "no --undo: it deletes for good" in line


# -- --undo, the same on every command that changes a checkpoint ------------------------------


def damaged(tmp_path: Path) -> Path:
    root = tmp_path / "ckpt"
    shutil.copytree(HDFS, root)
    truncate_latest_delta(root)
    age_everything(root)
    return root


def test_undo_is_a_flag_and_its_old_spellings_say_the_new(tmp_path: Path) -> None:
    root = damaged(tmp_path)
    applied = run_cli("repair", str(root), "--apply", "--yes", "--json")
    assert applied.exit_code == 0, applied.stdout
    manifest = applied.json()["result"]["manifest"]
    # repair --undo MANIFEST (the old spelling: a path).
    line = one_line(run_cli("repair", "--undo", manifest))
    assert f"did you mean ckpt repair CHECKPOINT --undo --manifest {manifest}" in line
    assert "--undo" in one_line(run_cli("repair", str(root), "--manifest", manifest))
    assert "not both" in one_line(run_cli("repair", str(root), "--undo", "--apply"))
    assert "--undo --manifest" in one_line(
        run_cli("repair", str(root), "--undo", "--quarantine", str(tmp_path))
    )
    for command in ("repair", "repartition", "convert"):  # the same option set
        text = run_cli(command, "--help").stdout
        assert "--undo " in text and "--manifest FILE" in text and "--quarantine DIR" in text


def test_undo_of_each_command_finds_its_own_newest_manifest(tmp_path: Path) -> None:
    root = damaged(tmp_path)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert run_cli("repair", str(root), "--apply", "--yes").exit_code == 0
    repaired = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    applied = run_cli("repartition", str(root), "--partitions", "3", "--apply", "--yes")
    assert applied.exit_code == 0, applied.stdout + applied.stderr
    # Each command undoes its own: repartition's first, then repair's under it.
    assert "no repartition" not in run_cli("repartition", str(root), "--undo").stderr
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == repaired
    undone = run_cli("repair", str(root), "--undo", "--json")
    assert undone.exit_code == 0 and undone.json()["restored"] > 0
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    # A second undo of each says so, exit 0, and changes nothing.
    for command in ("repair", "repartition"):
        again = run_cli(command, str(root), "--undo", "--json").json()
        assert again["already_undone"] and again["restored"] == again["removed"] == 0
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_library_undo(tmp_path: Path) -> None:
    root = damaged(tmp_path)
    other = tmp_path / "other"
    shutil.copytree(HDFS, other)
    ckpt = ckpt_cli.open(str(root))
    assert run_cli("repair", str(root), "--apply", "--yes").exit_code == 0
    (manifest,) = tmp_path.glob("ckpt.ckpt-quarantine/*/manifest.json")
    # A repair manifest is not undone as a repartition, nor on another checkpoint.
    with pytest.raises(CkptError, match="a repair manifest, not a repartition one"):
        undo_repartition(Storage.from_url(str(root)), manifest=str(manifest))
    with pytest.raises(CkptError, match="the manifest of .*, not of"):
        undo_repair(Storage.from_url(str(other)), manifest=str(manifest))
    first = ckpt.undo_repair()
    assert first.restored > 0 and first.already_undone is None
    body = json.loads(manifest.read_text())
    assert body["undone"]
    second = ckpt.undo_repair(manifest=str(manifest))
    assert second.already_undone and (second.restored, second.removed) == (0, 0)
    with pytest.raises(CkptError, match="no repartition to undo"):
        ckpt.undo_repartition()
