"""The attack kit, bounded: every real fixture damaged at random (seeded) and every command
run on it in-process. ``scripts/attack.py`` runs the same kit with many more seeds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.attack import attack_once
from tests.conftest import CASES, Case, case_params, run_cli

# One seed per fixture, seeds 0 and 1 in turn over the fixtures (50 of them: the fast tier's
# time); scripts/attack.py runs every fixture with many seeds.
SEEDS = (0, 1)


@pytest.mark.parametrize("case", case_params())
def test_random_damage_never_crashes_or_passes_a_broken_checksum(
    case: Case, tmp_path: Path
) -> None:
    seed = SEEDS[[c.name for c in CASES].index(case.name) % len(SEEDS)]
    failures = attack_once(case, seed, tmp_path).failures
    assert not failures, "\n".join(str(f) for f in failures)


def test_link_loop_in_place_of_a_snapshot_is_a_missing_file_not_a_listing_error(
    tmp_path: Path,
) -> None:
    # A link to itself (ELOOP) made os.DirEntry.is_dir raise and the listing stop with
    # "cannot list: Too many levels of symbolic links"; Hadoop's listStatus skips it, so the
    # restart misses that file: validate names it and says NOT OK.
    case = next(c for c in CASES if c.name == "spark4-rocksdb-agg")
    root = tmp_path / "checkpoint"
    shutil.copytree(case.checkpoint, root)
    zipfile = root / "state" / "0" / "0" / "10.zip"
    zipfile.unlink()
    zipfile.symlink_to(zipfile)
    result = run_cli("validate", str(root), "--json")
    assert result.exit_code == 1, result.stderr
    codes = {f["code"] for f in result.json()["findings"]}
    assert {"MISSING_STATE_FILE", "SYMLINK"} <= codes
    # orphans exits 1 when the copy's files are old enough to remove (they keep the
    # checkout's mtimes): either way not 2, a listing error.
    for command, codes_ok in (("versions", {0}), ("orphans", {0, 1}), ("cleanup", {0})):
        assert run_cli(command, str(root)).exit_code in codes_ok, command
