"""The restart scope's lookups (``Checkpoint.file``, ``Checkpoint.sidecars_of``,
``ValidationRun.missing_targets``) build no index over the listing for a few files; they
must find exactly what indexes over every file find, or a damaged checksum would go
unreported."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ckpt_cli.core.model import Checkpoint, CheckpointFile, FileKind
from ckpt_cli.validate import validate
from ckpt_cli.validate.context import ValidationRun
from tests.conftest import CASES_DIR, Case, case_params

V2 = CASES_DIR / "spark4-crash-rocksdb-v2" / "checkpoint"


def _run(root: Path) -> ValidationRun:
    ckpt = Checkpoint.open(str(root)).tolerant_view()
    return ValidationRun(ckpt, batch=None, all_versions=False, deep=False)


@pytest.mark.parametrize("case", case_params())
def test_lookups_match_the_full_indexes(case: Case) -> None:
    run = _run(case.checkpoint)
    ckpt = run.ckpt
    files = ckpt.files
    by_path = {f.path: f for f in files}
    sidecars = ckpt.of_kind(FileKind.HADOOP_CRC, FileKind.SPARK_CHECKSUM)
    sidecars_by_file: dict[str, list[CheckpointFile]] = {}
    for f in sidecars:
        if f.target:
            sidecars_by_file.setdefault(f.target, []).append(f)
    # Beside every path, names that sort next to it and are not listed.
    absent = [p for f in files for p in (f.path + "~", f.path[:-1], "." + f.path)]
    for path in [f.path for f in files] + absent:
        assert ckpt.file(path) is by_path.get(path), path
        assert ckpt.sidecars_of(path) == sidecars_by_file.get(path, []), path
    expected = {f.target for f in sidecars if f.target and f.target not in by_path}
    assert run.missing_targets(sidecars) == expected


def _copy(root: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "checkpoint"
    shutil.copytree(root, dest)
    return dest


def test_damaged_spark_checksum_of_the_restart_version_is_reported(tmp_path: Path) -> None:
    root = _copy(V2, tmp_path)
    # Every Spark 4 checksum of the state files off by one: the restart's are among them.
    damaged = []
    for crc in sorted((root / "state").rglob("*.crc")):
        if crc.name.startswith("."):
            continue
        obj = json.loads(crc.read_text())
        obj["value"] += 1
        crc.write_text(json.dumps(obj))
        (crc.parent / f".{crc.name}.crc").unlink(missing_ok=True)
        damaged.append(str(crc.relative_to(root)))
    report = validate(Checkpoint.open(str(root)))
    found = [f for f in report.findings if f.code == "CRC_MISMATCH"]
    assert found, report.findings
    assert all(f.paths[0] in damaged for f in found)


def test_damaged_hadoop_crc_of_a_log_entry_is_reported(tmp_path: Path) -> None:
    root = _copy(V2, tmp_path)
    ckpt = Checkpoint.open(str(root))
    latest = ckpt.batches.latest_committed
    crc = root / "commits" / f".{latest}.crc"
    assert crc.exists()
    data = bytearray(crc.read_bytes())
    data[-1] ^= 0xFF
    crc.write_bytes(bytes(data))
    report = validate(Checkpoint.open(str(root)))
    assert any(
        f.code == "CRC_MISMATCH" and f.paths[0] == f"commits/.{latest}.crc" for f in report.findings
    ), report.findings


def test_orphan_sidecar_is_reported(tmp_path: Path) -> None:
    root = _copy(V2, tmp_path)
    (root / "state/0/0/.999.changelog.crc").write_bytes(b"crc\x00\x00\x00\x02\x00")
    (root / "state/0/0/999_x.zip.crc").write_text('{"algorithm":"CRC32C","value":1}')
    report = validate(Checkpoint.open(str(root)), decode_limit=0)
    orphans = {p for f in report.findings if f.code == "ORPHAN_FILE" for p in f.paths}
    assert {"state/0/0/.999.changelog.crc", "state/0/0/999_x.zip.crc"} <= orphans
