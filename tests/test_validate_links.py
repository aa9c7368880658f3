"""``validate`` on checkpoints with symbolic links, and on unreadable operator metadata. All on
copies of the real fixtures, damaged here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CASES, run_cli
from tests.test_safety import HDFS, ROCKS, copy

pytestmark = pytest.mark.skipif(not CASES, reason="no fixtures")


def findings(root: Path, *args: str) -> tuple[bool, list[dict[str, Any]]]:
    result = run_cli("validate", str(root), "--json", *args)
    assert result.exit_code in (0, 1), result.stderr
    report = result.json()
    return report["ok"], report["findings"]


def link_sst_dir_out(root: Path, tmp_path: Path) -> Path:
    """Move partition 0's ``SSTs`` out of the checkpoint and link it back (Spark reads through)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "state/0/0/SSTs").rename(outside / "SSTs")
    (root / "state/0/0/SSTs").symlink_to(outside / "SSTs", target_is_directory=True)
    return outside / "SSTs"


# -- symbolic links ------------------------------------------------------------------------------


@pytest.mark.parametrize("scope", [(), ("--all-versions", "--deep")])
def test_validate_reports_a_linked_sst_directory_instead_of_missing_ssts(
    tmp_path: Path, scope: tuple[str, ...]
) -> None:
    root = copy(ROCKS, tmp_path)
    target = link_sst_dir_out(root, tmp_path)
    ok, found = findings(root, *scope)
    assert ok, found
    assert not [f for f in found if f["code"] == "MISSING_SST"]
    (link,) = [f for f in found if f["code"] == "SYMLINK"]
    assert link["severity"] == "warning" and link["paths"] == ["state/0/0/SSTs"]
    assert link["target"] == str(target.resolve()) and link["files_behind"] >= 2
    assert "not checked" in link["message"] and str(target.resolve()) in link["message"]


def test_validate_dangling_sst_directory_link_is_an_error(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    target = link_sst_dir_out(root, tmp_path)
    target.rename(tmp_path / "moved-away")
    ok, found = findings(root)
    assert not ok
    assert not [f for f in found if f["code"] == "MISSING_SST"]
    (link,) = [f for f in found if f["code"] == "SYMLINK"]
    assert link["severity"] == "error" and link["files_behind"] >= 2
    assert "does not exist" in link["message"] and "Spark cannot read them" in link["message"]


def test_validate_reads_a_linked_file_and_says_it_is_a_link(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    zip_path = root / "state/0/1/10.zip"  # the zip a restart loads
    zip_path.rename(outside / "10.zip")
    zip_path.symlink_to(outside / "10.zip")
    ok, found = findings(root)
    assert ok, found
    (link,) = [f for f in found if f["code"] == "SYMLINK"]
    assert link["severity"] == "warning" and link["paths"] == ["state/0/1/10.zip"]
    assert "the file" in link["message"]
    # Read through the link like any file: a damaged target is still found.
    (outside / "10.zip").write_bytes((outside / "10.zip").read_bytes()[:100])
    ok, found = findings(root)
    assert not ok and {"state/0/1/10.zip"} <= {p for f in found for p in f["paths"]}


def test_validate_linked_partition_directory_is_not_a_missing_partition(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "state/0/0").rename(outside / "0")
    (root / "state/0/0").symlink_to(outside / "0", target_is_directory=True)
    ok, found = findings(root)
    assert ok, found
    assert [f["code"] for f in found] == ["SYMLINK"]
    assert found[0]["files_behind"] == 2  # its state and the store schema, not checked


def test_versions_and_inspect_do_not_crash_on_links(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    target = link_sst_dir_out(root, tmp_path)
    (root / "state/0/1/8.zip").unlink()
    (root / "state/0/1/8.zip").symlink_to(tmp_path / "nowhere")  # dangling
    assert run_cli("versions", str(root), "--json").exit_code == 0
    assert run_cli("versions", str(root)).exit_code == 0
    behind = f"state/0/0/SSTs/{next(target.iterdir()).name}"
    result = run_cli("inspect", "--checkpoint", str(root), behind)
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert "behind the symbolic link state/0/0/SSTs" in result.stderr.replace("\n", " ")
    result = run_cli("inspect", "--checkpoint", str(root), "state/0/1/8.zip")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert "state/0/1/8.zip: a symbolic link to" in result.stderr
    assert "does not exist" in result.stderr


# -- operator metadata ---------------------------------------------------------------------------

OPERATOR_METADATA = "state/0/_metadata/metadata"


def garbage_json(path: Path) -> None:
    path.write_bytes(b"v1\n{bad")


def emptied(path: Path) -> None:
    path.write_bytes(b"")


def newer_version(path: Path) -> None:
    path.write_bytes(b"v9" + path.read_bytes()[2:])


def no_header(path: Path) -> None:
    path.write_bytes(path.read_bytes().split(b"\n", 1)[1])


def damage_operator_metadata(root: Path, damage: Callable[[Path], None]) -> None:
    damage(root / OPERATOR_METADATA)
    # A changed file with a stale .crc is CRC_MISMATCH (an error) on its own; without it, only
    # what Spark makes of the content is left.
    (root / "state/0/_metadata/.metadata.crc").unlink()


@pytest.mark.parametrize("damage", [garbage_json, emptied, newer_version, no_header])
def test_unreadable_operator_metadata_is_a_warning(
    tmp_path: Path, damage: Callable[[Path], None]
) -> None:
    root = copy(HDFS, tmp_path)
    damage_operator_metadata(root, damage)
    for scope in ((), ("--all-versions", "--deep")):
        ok, found = findings(root, *scope)
        assert ok, found  # Spark 4.3 restarts (tests/test_operator_metadata_spark.py)
        about = [f for f in found if OPERATOR_METADATA in f["paths"]]
        # --deep reads rows too, and names the damaged file it could not read them for.
        rows = [f for f in about if f["code"] == "ROWS_NOT_DECODED"]
        assert all("cannot decode them yet" not in f["message"] for f in rows)
        (finding,) = [f for f in about if f["code"] != "ROWS_NOT_DECODED"]
        assert finding["code"] == ("EMPTY_FILE" if damage is emptied else "CORRUPT_FILE")
        assert finding["severity"] == "warning"
        assert "restarts without it" in finding["message"]
    assert run_cli("versions", str(root)).exit_code == 0
