"""The commands that write a new batch or a copy (``convert``, ``state delete``,
``relocate``) touch nothing outside the checkpoint root but their quarantine (or, for
relocate, the new home), and refuse a checkpoint with a symbolic link in it, whose target
lies outside, before anything is written: a link's target keeps its bytes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import CASES_DIR, run_cli
from tests.fixture_copies import age_everything
from tests.kill_support import tree

RUNS = [
    ("spark4-hdfs-agg", ["convert", "{root}", "--provider", "rocksdb"]),
    ("spark4-rocksdb-agg", ["convert", "{root}", "--provider", "hdfs"]),
    (
        "spark4-hdfs-agg",
        ["state", "delete", "{root}", "--operator", "0", "--where", "key.k = 'k0'"],
    ),
    (
        "spark4-rocksdb-changelog",
        ["state", "delete", "{root}", "--operator", "0", "--where", "value.count > 1"],
    ),
    # Format v2 (ids, lineage, .crc files), two operators, session windows.
    (
        "spark4-rocksdb-v2",
        ["state", "delete", "{root}", "--operator", "0", "--where", "key.k = 'k1'"],
    ),
    (
        "spark4-multi-op-rocksdb",
        ["state", "delete", "{root}", "--operator", "0", "--where", "key.k = 'k2'"],
    ),
    (
        "spark4-session-hdfs",
        ["state", "delete", "{root}", "--operator", "0", "--where", "key.k = 'k1'"],
    ),
    ("spark4-tws-row", ["relocate", "{root}", "{home}"]),
    # transformWithState: every column family (a relocated copy, which Spark can restart).
    (
        "spark4-tws-pandas",
        ["state", "delete", "{root}", "--operator", "0", "--where", "key.k = 'k1'"],
    ),
    # Checkpoint format moves (the zips of v1 -> v2 last), session keys cut in two, joins.
    ("spark4-rocksdb-changelog", ["convert", "{root}", "--format-version", "2"]),
    ("spark4-rocksdb-v2", ["convert", "{root}", "--format-version", "1"]),
    ("spark4-session-hdfs", ["convert", "{root}", "--provider", "rocksdb"]),
    (
        "spark4-join",
        ["state", "delete", "{root}", "--operator", "0", "--where", "key.field0 = 'k1'"],
    ),
    (
        "spark4-join-v3-rocksdb",
        ["state", "delete", "{root}", "--operator", "0", "--where", "key.field0 = 'k1'"],
    ),
]


def _args(template: list[str], root: Path, home: Path) -> list[str]:
    return [a.format(root=root, home=home) for a in template]


def _outside(tmp_path: Path, *inside: Path) -> dict[str, bytes]:
    """Every file under ``tmp_path`` outside ``inside`` (and their quarantines)."""
    keep = [str(p) for p in inside] + [f"{p}.ckpt-quarantine" for p in inside]
    return {
        k: v
        for k, v in tree(tmp_path).items()
        if not any(str(tmp_path / k).startswith(prefix) for prefix in keep)
    }


@pytest.mark.parametrize(("name", "template"), RUNS)
def test_nothing_outside_the_root_changes(name: str, template: list[str], tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    if "tws" in name and template[0] != "relocate":
        source = CASES_DIR / name / "checkpoint"
        moved = run_cli("relocate", str(source), str(root), "--apply", "-y")
        assert moved.exit_code == 0, moved.stderr
    else:
        shutil.copytree(CASES_DIR / name / "checkpoint", root)
    age_everything(root)
    # Bystanders beside the checkpoint, one of them named like a checkpoint file.
    (tmp_path / "neighbour").mkdir()
    (tmp_path / "neighbour" / "1.delta").write_bytes(b"not yours")
    (tmp_path / "offsets").write_text("not yours either")
    home = tmp_path / "new-home"
    before = _outside(tmp_path, root, home)
    result = run_cli(*_args(template, root, home), "--apply", "--yes")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert _outside(tmp_path, root, home) == before
    undo = template[:2] if template[0] == "state" else template[:1]
    if template[0] == "relocate":  # its --undo removes the copy in the new home
        undone = run_cli("relocate", str(root), str(home), "--undo", "--yes")
        assert undone.exit_code == 0, undone.stderr
        assert not [p for p in home.rglob("*") if p.is_file()]
    else:
        undone = run_cli(*undo, str(root), "--undo", "--yes")
        assert undone.exit_code == 0, undone.stderr
    assert _outside(tmp_path, root, home) == before


@pytest.mark.parametrize(("name", "template"), RUNS)
def test_a_symbolic_link_is_refused_and_its_target_untouched(
    name: str, template: list[str], tmp_path: Path
) -> None:
    root = tmp_path / "ckpt"
    shutil.copytree(CASES_DIR / name / "checkpoint", root)
    age_everything(root)
    target = tmp_path / "elsewhere"
    shutil.move(str(root / "state" / "0" / "0"), target)
    (root / "state" / "0" / "0").symlink_to(target, target_is_directory=True)
    home = tmp_path / "new-home"
    outside = tree(target)
    for apply in ([], ["--apply", "--yes"]):
        result = run_cli(*_args(template, root, home), *apply)
        assert result.exit_code == 2, result.stdout
        error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(error) == 1 and "symbolic link" in error[0], result.stderr
    assert tree(target) == outside and not home.exists()
    assert not (tmp_path / "ckpt.ckpt-quarantine").exists()
