"""A version header ckpt does not know is "unsupported", never "corrupt".

Each test copies a real fixture, rewrites one file's version line with code (its Hadoop
``.crc`` and Spark ``<name>.crc`` rewritten to match, so only the version is new) and checks
that validate reports UNSUPPORTED_VERSION (for a log entry too) with a
hint that neither calls the file corrupt nor tells the user to restore a backup, and that
replay and inspect stop with one line saying "unsupported" and exit code 2.
"""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.formats import compression
from ckpt_cli.formats.rocksdb_zip import parse_zip_metadata
from ckpt_cli.validate import CODES
from tests.conftest import CASES_DIR, run_cli
from tests.lineage_damage import write_checksums

ROCKS = CASES_DIR / "spark4-rocksdb-agg" / "checkpoint"
V2 = CASES_DIR / "spark4-rocksdb-v2" / "checkpoint"
HDFS = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"
SPARK40_V2 = CASES_DIR / "spark40-rocksdb-v2" / "checkpoint"


def copy(root: Path, tmp_path: Path) -> Path:
    dest = tmp_path / root.parent.name
    shutil.copytree(root, dest)
    return dest


def rewrite(path: Path, data: bytes) -> None:
    """Replace a file's bytes and regenerate the checksums that cover it."""
    path.write_bytes(data)
    write_checksums(path, data)


def latest_batch(root: Path) -> int:
    return max(int(p.name) for p in (root / "commits").iterdir() if p.name.isdigit())


def target_file(root: Path, pattern: str) -> tuple[str, int]:
    """The file of state version latest+1 (what a restart loads) in partition 0, and that
    batch."""
    batch = latest_batch(root)
    (path,) = sorted((root / "state/0/0").glob(pattern.format(v=batch + 1)))
    return str(path.relative_to(root)), batch


def zip_with_header(path: Path, header: str) -> None:
    src = zipfile.ZipFile(io.BytesIO(path.read_bytes()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "metadata":
                data = header.encode() + data[data.index(b"\n") :]
            dst.writestr(info, data)
    rewrite(path, out.getvalue())


def unknown_zip_metadata(root: Path) -> tuple[str, int]:
    path, batch = target_file(root, "{v}.zip")
    zip_with_header(root / path, "v9")
    return path, batch


def unknown_changelog(root: Path) -> tuple[str, int]:
    """The newest changelog of partition 0 whose version has no zip: its batch loads a zip
    and replays this changelog."""
    part = root / "state/0/0"
    zips = {p.name.split("_")[0] for p in part.glob("*.zip")}
    path = max(
        (p for p in part.glob("*_*.changelog") if p.name.split("_")[0] not in zips),
        key=lambda p: int(p.name.split("_")[0]),
    )
    plain = compression.decompress(str(path), path.read_bytes())
    assert plain[:4] == b"\x00\x02v3"  # writeUTF("v3"): a format-v2 changelog
    rewrite(path, compression.compress(b"\x00\x02v9" + plain[4:], "lz4"))
    return str(path.relative_to(root)), int(path.name.split("_")[0]) - 1


def unknown_schema(root: Path) -> tuple[str, int]:
    path = root / "state/0/0/_metadata/schema"
    data = path.read_bytes()
    assert data[:4] == b"\x00\x02v2"  # writeUTF("v2")
    rewrite(path, b"\x00\x02v9" + data[4:])
    return str(path.relative_to(root)), latest_batch(root)


CASES: dict[str, tuple[Path, Callable[[Path], tuple[str, int]]]] = {
    "zip-metadata": (ROCKS, unknown_zip_metadata),
    "changelog": (V2, unknown_changelog),
    "state-schema": (HDFS, unknown_schema),
}


def no_blame(text: str) -> None:
    lowered = text.lower()
    assert "backup" not in lowered and "corrupt" not in lowered, text


def test_unsupported_version_hint_blames_nothing() -> None:
    severity, hint = CODES["UNSUPPORTED_VERSION"]
    assert severity == "error"  # ckpt could not check the file: never "OK"
    no_blame(hint)
    assert "newer Spark" in hint


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("mode", [[], ["--all-versions"], ["--all-versions", "--deep"]])
def test_validate_reports_unsupported_not_corrupt(
    name: str, mode: list[str], tmp_path: Path
) -> None:
    fixture, damage = CASES[name]
    root = copy(fixture, tmp_path)
    path, batch = damage(root)
    result = run_cli("validate", str(root), "--json", "--batch", str(batch), *mode)
    assert result.exit_code == 1, result.stderr
    found: list[dict[str, Any]] = result.json()["findings"]
    bad = [f for f in found if f["severity"] != "info"]
    assert {f["code"] for f in bad} == {"UNSUPPORTED_VERSION"}, bad
    assert any(path in f["paths"] for f in bad), (path, bad)
    for f in bad:
        assert "unsupported" in f["message"] and "v9" in f["message"], f
        no_blame(f["message"] + " " + f["hint"])


@pytest.mark.parametrize("name", sorted(CASES))
def test_replay_and_inspect_say_unsupported(name: str, tmp_path: Path) -> None:
    fixture, damage = CASES[name]
    root = copy(fixture, tmp_path)
    path, batch = damage(root)
    replay = run_cli(
        "replay", str(root), "--batch", str(batch), "--partition", "0", "--format", "jsonl"
    )
    inspect = run_cli("inspect", path, "--checkpoint", str(root))
    for result in (replay, inspect):
        assert result.exit_code == 2, (result.stdout, result.stderr)
        assert "unsupported" in result.stderr and "Traceback" not in result.stderr
        no_blame(result.stderr)
        assert path in result.stderr


def test_unsupported_log_version_is_not_called_corrupt(tmp_path: Path) -> None:
    root = copy(HDFS, tmp_path)
    path = root / "offsets" / str(latest_batch(root))
    rewrite(path, b"v9" + path.read_bytes()[2:])
    result = run_cli("validate", str(root), "--json")
    assert result.exit_code == 1
    bad = [f for f in result.json()["findings"] if f["severity"] != "info"]
    assert [f["code"] for f in bad] == ["UNSUPPORTED_VERSION"], bad
    assert "unsupported" in bad[0]["message"]
    no_blame(bad[0]["message"] + " " + bad[0]["hint"])


@pytest.mark.skipif(not SPARK40_V2.is_dir(), reason="no Spark 4.0 fixture")
def test_spark40_format_v2_zip_metadata_is_v2_and_read() -> None:
    """Spark 4.0 writes "v" + checkpointFormatVersion as the zip metadata's first line."""
    zips = sorted(SPARK40_V2.glob("state/0/*/*.zip"))
    assert zips
    for path in zips:
        text = zipfile.ZipFile(path).read("metadata").decode()
        assert text.startswith("v2\n")
        meta = parse_zip_metadata(str(path), text)
        assert meta.version == 2 and meta.sst_files
    for mode in ([], ["--all-versions", "--deep"]):
        result = run_cli("validate", str(SPARK40_V2), "--json", *mode)
        assert result.exit_code == 0, result.stdout  # healthy: Spark 4.0 restarts it
        found = json.loads(result.stdout)["findings"]
        assert all(f["severity"] == "info" for f in found if f["code"] != "ZIP_METADATA_V2")
        # A restart loads version 6's zips, and changelogs go back only to version 4: no
        # Spark 4.1+ restarts it (fixtures/v2upgrade, shape zip-short; tests/test_v2_upgrade).
        (note,) = [f for f in found if f["code"] == "ZIP_METADATA_V2"]
        assert note["severity"] == "warning"
        assert note["upgrade"] == {"4.1": "fails", "4.2+": "fails"}
        assert set(note["paths"]) <= {str(p.relative_to(SPARK40_V2)) for p in zips}
        assert "Spark 4.1 and later" in note["message"]
        no_blame(note["message"] + " " + note["hint"])


@pytest.mark.parametrize("name", [*sorted(CASES), "offsets"])
def test_repair_refuses_and_touches_nothing(name: str, tmp_path: Path) -> None:
    """A file ckpt cannot read may be healthy: repair must not roll it back or quarantine it."""
    if name == "offsets":
        root = copy(HDFS, tmp_path)
        log = root / "offsets" / str(latest_batch(root))
        rewrite(log, b"v9" + log.read_bytes()[2:])
    else:
        fixture, damage = CASES[name]
        root = copy(fixture, tmp_path)
        damage(root)
    before = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    result = run_cli("repair", str(root), "--apply", "--yes", "--json")
    if name == "changelog":  # the latest batch loads a zip, not this changelog
        assert result.exit_code == 0 and result.json()["actions"] == []
    else:
        assert result.exit_code == 2, (result.stdout, result.stderr)
        assert "cannot repair" in result.stderr and "ckpt does not read" in result.stderr
        no_blame(result.stderr)
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == before
