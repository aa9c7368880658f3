"""``ckpt repartition`` touches nothing outside the checkpoint root but its quarantine.

The checkpoint's parent directory also holds sibling files, a decoy checkpoint (repartitioned
itself, so it has a quarantine and a manifest of its own) and a folder that symbolic links
inside the checkpoint point to. ``--apply``, an apply killed mid-write then finished, and
``--undo`` leave every byte and mtime there unchanged, the quarantine aside.

Symbolic links inside the checkpoint (a partition directory, an ``offsets/`` file, an SST, a
``--quarantine`` through a link) are refused with one line and exit 2 before anything is
written, as ``repair`` refuses them (``cleanup`` skips them instead: it only deletes). A
``--quarantine`` anywhere outside the checkpoint is allowed, as for ``repair``; inside it is
refused by both.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ckpt_cli.change.flow import Guards
from ckpt_cli.change.lock import LOCK_NAME
from ckpt_cli.repartition.plan import RepartitionRefused
from ckpt_cli.repartition.run import run_repartition
from ckpt_cli.storage import Storage
from tests.conftest import CASES_DIR, run_cli
from tests.fixture_copies import age_everything
from tests.kill_support import die_in_nth_write, tree
from tests.test_repartition_tasks import Tasks

HDFS, ROCKS_V2, ROCKS = "spark4-hdfs-agg", "spark4-rocksdb-v2", "spark4-rocksdb-agg"
APPLY = ("--partitions", "3", "--apply", "-y", "--force")
QUARANTINE = "ckpt.ckpt-quarantine"  # the default, beside the checkpoint


def setting(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """``<parent>/ckpt``, a copy of fixture ``name``, among neighbours; (parent, root)."""
    parent = tmp_path / "data"
    root = parent / "ckpt"
    shutil.copytree(CASES_DIR / name / "checkpoint", root)
    # A neighbour whose name starts like the checkpoint's, with its own quarantine.
    decoy = parent / "ckpt-decoy"
    shutil.copytree(CASES_DIR / name / "checkpoint", decoy)
    age_everything(decoy)
    assert run_cli("repartition", str(decoy), *APPLY).exit_code == 0
    (parent / "outside").mkdir()
    (parent / "outside" / "precious").write_bytes(b"not the checkpoint's")
    (parent / "notes.txt").write_text("siblings")
    (parent / "ckpt.json").write_text("{}")
    age_everything(parent)
    return parent, root


def outside(parent: Path, root: Path, *allowed: Path) -> dict[str, tuple[bytes | str, int]]:
    """Every entry under ``parent`` but ``root`` and the ``allowed`` quarantines: a file's
    bytes, a link's target or a directory's marker, with its mtime (links not followed)."""
    skip = {root, *allowed}
    found: dict[str, tuple[bytes | str, int]] = {}
    for dirpath, dirs, files in os.walk(parent):
        here = Path(dirpath)
        dirs[:] = [d for d in dirs if here / d not in skip]
        for name in [*dirs, *files]:
            path = here / name
            if path in skip:
                continue
            mtime = path.lstat().st_mtime_ns
            if path.is_symlink():
                body: bytes | str = f"-> {os.readlink(path)}"
            elif path.is_dir():
                body = "dir"
            else:
                body = path.read_bytes()
            found[str(path.relative_to(parent))] = (body, mtime)
    return found


def one_line_refusal(args: tuple[str, ...], *words: str) -> None:
    result = run_cli("repartition", *args)
    assert result.exit_code == 2, result.stdout + result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith("error: ") and all(w in first for w in words), result.stderr


@pytest.mark.parametrize(("name", "nth"), [(HDFS, 6), (ROCKS_V2, 12)])
def test_apply_killed_finished_and_undone_touch_nothing_outside(
    name: str, nth: int, tmp_path: Path
) -> None:
    parent, root = setting(tmp_path, name)
    original = tree(root)
    before = outside(parent, root)
    quarantine = parent / QUARANTINE

    # Dies in the middle of a state file, offsets/N+1 written, commits/N+1 not.
    died = die_in_nth_write(nth, f"{root}/", ["repartition", str(root), *APPLY])
    assert died.returncode == 9, died.stderr.decode()
    assert outside(parent, root, quarantine) == before
    finished = run_cli("repartition", str(root), *APPLY, "--break-lock")
    assert finished.exit_code == 0, finished.stdout + finished.stderr
    assert outside(parent, root, quarantine) == before
    undone = run_cli("repartition", str(root), "--undo")
    assert undone.exit_code == 0, undone.stdout + undone.stderr
    assert outside(parent, root, quarantine) == before
    # The finish's own manifest is undone: a second --undo says so and changes nothing; the
    # killed attempt's, the older one, is undone by naming it.
    killed_state = tree(root)
    again = run_cli("repartition", str(root), "--undo")
    assert again.exit_code == 0 and "Already undone" in again.stdout, again.stdout
    assert tree(root) == killed_state
    manifests = [
        json.loads(m.read_text()) | {"path": str(m)} for m in quarantine.glob("*/manifest.json")
    ]
    (killed,) = [m["path"] for m in manifests if not m.get("undone")]
    undone = run_cli("repartition", str(root), "--undo", "--manifest", killed)
    assert undone.exit_code == 0, undone.stdout + undone.stderr
    assert tree(root) == original
    assert outside(parent, root, quarantine) == before

    # Uninterrupted, into a quarantine of one's own outside the checkpoint (allowed, as for
    # repair), and undone from there.
    mine = parent / "q"
    where = ("--quarantine", str(mine))
    assert run_cli("repartition", str(root), *APPLY, *where).exit_code == 0
    assert (mine / "manifest.json").is_file()
    assert outside(parent, root, quarantine, mine) == before
    undo_from = ("--manifest", str(mine / "manifest.json"))
    assert run_cli("repartition", str(root), "--undo", *undo_from).exit_code == 0
    assert tree(root) == original
    assert outside(parent, root, quarantine, mine) == before


def link_partition(root: Path, away: Path) -> str:
    (root / "state/0/1").rename(away / "1")
    (root / "state/0/1").symlink_to(away / "1", target_is_directory=True)
    return "state/0/1"


def link_offsets(root: Path, away: Path) -> str:
    (root / "offsets/9").rename(away / "9")
    (root / "offsets/9").symlink_to(away / "9")
    return "offsets/9"


def link_sst(root: Path, away: Path) -> str:
    sst = sorted((root / "state/0/0/SSTs").glob("*.sst"))[-1]
    sst.rename(away / sst.name)
    sst.symlink_to(away / sst.name)
    return f"state/0/0/SSTs/{sst.name}"


def link_quarantine(root: Path, away: Path) -> str:
    (root / "q").symlink_to(away, target_is_directory=True)
    return "q"


@pytest.mark.parametrize(
    ("name", "link"),
    [
        (ROCKS, link_partition),
        (HDFS, link_offsets),
        (ROCKS, link_sst),
        (HDFS, link_quarantine),
    ],
)
def test_symlinks_inside_are_refused_before_anything_is_written(
    name: str, link: object, tmp_path: Path
) -> None:
    parent, root = setting(tmp_path, name)
    assert callable(link)
    rel = link(root, parent / "outside")
    age_everything(parent)
    original = tree(root)
    before = outside(parent, root)
    # Into a quarantine through the link (the only way to reach it), else the default one.
    where = ("--quarantine", str(root / "q" / "x")) if rel == "q" else ()
    for given in ((str(root), *APPLY, *where), (str(root), "--partitions", "3")):  # and the dry run
        one_line_refusal(given, f"{rel} is a symbolic link", "not repartitioning")
        assert tree(root) == original and not (root / LOCK_NAME).exists()
        assert outside(parent, root) == before  # no quarantine made either
        assert (root / rel).is_symlink()


def test_undo_refuses_a_link_made_since_before_changing_anything(tmp_path: Path) -> None:
    parent, root = setting(tmp_path, HDFS)
    assert run_cli("repartition", str(root), *APPLY).exit_code == 0
    # The undo would delete commits/10, which now resolves outside.
    (root / "commits/10").rename(parent / "outside" / "10")
    (root / "commits/10").symlink_to(parent / "outside" / "10")
    done = tree(root)
    before = outside(parent, root)
    undone = run_cli("repartition", str(root), "--undo")
    assert undone.exit_code == 2
    assert "commits/10 is a symbolic link" in undone.stderr.splitlines()[0]
    assert tree(root) == done and (root / "commits/10").is_symlink()
    assert outside(parent, root) == before


@pytest.mark.parametrize("inside", ["", "qq", "state/0/5"])
def test_a_quarantine_inside_the_checkpoint_is_refused_as_by_repair(
    inside: str, tmp_path: Path
) -> None:
    parent, root = setting(tmp_path, HDFS)
    original = tree(root)
    before = outside(parent, root)
    where = str(root / inside) if inside else str(root)
    one_line_refusal((str(root), *APPLY, "--quarantine", where), "inside the checkpoint")
    assert tree(root) == original and (root / inside).exists() == (not inside)
    assert outside(parent, root) == before

    # repair draws the same line (a crashed checkpoint, with temp files to quarantine).
    crashed = parent / "crashed"
    shutil.copytree(CASES_DIR / "spark4-crash-hdfs" / "checkpoint", crashed)
    age_everything(crashed)
    kept = tree(crashed)
    where = str(crashed / inside) if inside else str(crashed)
    refused = run_cli("repair", str(crashed), "--apply", "-y", "--force", "--quarantine", where)
    assert refused.exit_code == 2 and "inside the checkpoint" in refused.stderr
    assert tree(crashed) == kept
    allowed = run_cli(
        "repair", str(crashed), "--apply", "-y", "--force", "--quarantine", str(parent / "rq")
    )
    assert allowed.exit_code == 0, allowed.stdout + allowed.stderr
    assert (parent / "rq" / "manifest.json").is_file()


# -- no empty quarantine left behind -------------------------------------------------------------


def listing(parent: Path) -> set[str]:
    return {str(p.relative_to(parent)) for p in parent.rglob("*")}


@pytest.mark.parametrize("engine", ["local", "tasks"])
def test_a_declined_or_refused_run_leaves_no_quarantine_behind(engine: str, tmp_path: Path) -> None:
    parent = tmp_path / "data"
    root = parent / "ckpt"
    shutil.copytree(CASES_DIR / ROCKS_V2 / "checkpoint", root)
    age_everything(root)
    # Tasks stage their records in the quarantine (as on Spark), then remove them.
    tasks = Tasks(parent) if engine == "tasks" else None
    before, original = listing(parent), tree(root)

    def declined(partitions: int = 3, where: str | None = None) -> None:
        run = run_repartition(
            Storage.from_url(str(root)),
            Guards(apply=True, force=True, confirm=lambda plan, question: False),
            partitions=partitions,
            quarantine=where,
            engine=tasks,
        )
        assert run.declined

    declined()
    assert listing(parent) == before and tree(root) == original
    if tasks is not None:  # it did stage there
        assert any(QUARANTINE in p for seen in tasks.seen for p in seen)
    declined(where=str(parent / "mine"))
    assert listing(parent) == before

    # Refused part way through reading the state (a damaged zip): nothing left either.
    zipped = next((root / "state/0/1").glob("10_*.zip"))
    zipped.write_bytes(b"damaged")
    with pytest.raises(RepartitionRefused, match="cannot be read completely"):
        declined()
    assert listing(parent) == before
    zipped.write_bytes(original[str(zipped.relative_to(root))])

    # An earlier repartition's quarantine stays, with its manifest.
    assert run_cli("repartition", str(root), *APPLY).exit_code == 0
    after = listing(parent)
    assert any(p.endswith("/manifest.json") for p in after if p.startswith(QUARANTINE))
    declined(partitions=1)
    assert listing(parent) == after
