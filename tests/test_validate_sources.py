"""``ckpt validate`` on ``sources/``: the file source log (batch and compact files) read as
FileStreamSource reads it on restart, each source's offset against it, and ``--deep``
verifying every checksum sidecar. Each test damages a copy of a real fixture."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CASES, CASES_DIR
from tests.test_validate import copy, drop_crc, findings, rewrite

pytestmark = pytest.mark.skipif(not CASES, reason="no fixtures")

# Both runs read one JSON file per batch; the first compacts its source log at batch 9.
COMPACTED = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"
UNCOMPACTED = CASES_DIR / "spark4-crash-hdfs" / "checkpoint"
ROCKS = CASES_DIR / "spark4-rocksdb-agg" / "checkpoint"


def errors(found: list[dict[str, Any]], code: str) -> list[dict[str, Any]]:
    return [f for f in found if f["code"] == code and f["severity"] == "error"]


def named(found: list[dict[str, Any]], code: str, path: str) -> list[dict[str, Any]]:
    return [f for f in found if f["code"] == code and path in f["paths"]]


def cut_last_entry(path: Path, keep_crc: bool = False) -> None:
    """Cut the file inside its last JSON line, as an interrupted copy does."""
    data = path.read_bytes()
    if keep_crc:
        path.write_bytes(data[:-20])
    else:
        rewrite(path, data[:-20])


def latest_source_batch(root: Path) -> Path:
    return max((root / "sources/0").glob("[0-9]*"), key=lambda p: int(p.name.split(".")[0]))


def test_truncated_latest_source_log_entry_is_an_error(tmp_path: Path) -> None:
    root = copy(UNCOMPACTED, tmp_path)
    path = latest_source_batch(root)
    cut_last_entry(path)
    code, found = findings(root)
    assert code == 1
    hits = errors(found, "TRUNCATED_FILE")
    assert [h["paths"] for h in hits] == [[f"sources/0/{path.name}"]], found


def test_truncated_entry_after_the_compact_file_is_an_error(tmp_path: Path) -> None:
    # sources/0/0-5 without a compact file: Spark reads them all back on restart.
    root = copy(UNCOMPACTED, tmp_path)
    cut_last_entry(root / "sources/0/2")
    code, found = findings(root)
    assert code == 1
    assert named(errors(found, "TRUNCATED_FILE"), "TRUNCATED_FILE", "sources/0/2"), found


def test_truncated_compact_file_is_an_error(tmp_path: Path) -> None:
    root = copy(COMPACTED, tmp_path)
    cut_last_entry(root / "sources/0/9.compact")
    code, found = findings(root)
    assert code == 1
    assert named(errors(found, "TRUNCATED_FILE"), "TRUNCATED_FILE", "sources/0/9.compact")


def test_batch_file_before_the_compact_file_is_only_read_by_deep(tmp_path: Path) -> None:
    # Spark reads 9.compact and never sources/0/8 again: a warning, and only with --deep.
    root = copy(COMPACTED, tmp_path)
    cut_last_entry(root / "sources/0/8")
    code, found = findings(root, "--fail-on", "warning")
    assert code == 0, found
    _, found = findings(root, "--deep")
    hits = named(found, "TRUNCATED_FILE", "sources/0/8")
    assert [h["severity"] for h in hits] == ["warning"], found


def test_missing_source_log_batch_is_an_error(tmp_path: Path) -> None:
    root = copy(UNCOMPACTED, tmp_path)
    (root / "sources/0/3").unlink()
    drop_crc(root / "sources/0/3")
    code, found = findings(root)
    assert code == 1
    assert named(errors(found, "MISSING_SOURCE_LOG"), "MISSING_SOURCE_LOG", "sources/0/3")


def test_offset_naming_a_batch_the_source_log_lacks_is_an_error(tmp_path: Path) -> None:
    root = copy(UNCOMPACTED, tmp_path)
    newest = latest_source_batch(root)
    newest.unlink()
    drop_crc(newest)
    latest = max(int(p.name) for p in (root / "offsets").iterdir() if p.name.isdigit())
    code, found = findings(root)
    assert code == 1
    hits = named(errors(found, "MISSING_SOURCE_LOG"), "MISSING_SOURCE_LOG", f"offsets/{latest}")
    assert hits and newest.name in hits[0]["message"], found


def test_bad_version_header_in_source_log(tmp_path: Path) -> None:
    root = copy(COMPACTED, tmp_path)
    path = root / "sources/0/9.compact"
    rewrite(path, b"v2" + path.read_bytes()[2:])
    _, found = findings(root)
    assert named(errors(found, "UNSUPPORTED_VERSION"), "UNSUPPORTED_VERSION", "sources/0/9.compact")
    rewrite(path, b"x1" + path.read_bytes()[2:])
    _, found = findings(root)
    assert named(errors(found, "CORRUPT_FILE"), "CORRUPT_FILE", "sources/0/9.compact")


def test_empty_source_log_file(tmp_path: Path) -> None:
    root = copy(COMPACTED, tmp_path)
    rewrite(root / "sources/0/9.compact", b"")
    _, found = findings(root)
    assert named(errors(found, "EMPTY_FILE"), "EMPTY_FILE", "sources/0/9.compact")


def test_corrupt_source_offset_is_an_error(tmp_path: Path) -> None:
    root = copy(COMPACTED, tmp_path)
    latest = max(int(p.name) for p in (root / "offsets").iterdir() if p.name.isdigit())
    path = root / f"offsets/{latest}"
    rewrite(path, path.read_bytes().replace(b'{"logOffset":', b'{"logOffzet":'))
    _, found = findings(root)
    assert named(errors(found, "CORRUPT_OFFSETS"), "CORRUPT_OFFSETS", f"offsets/{latest}")


def test_stale_crc_of_a_source_log_file_is_an_error(tmp_path: Path) -> None:
    # Spark reads it through FileContext, which ignores the .crc (test_validate_sources_spark),
    # and would read the changed file list: the file or its checksum changed, an error.
    root = copy(COMPACTED, tmp_path)
    path = root / "sources/0/9.compact"
    path.write_bytes(path.read_bytes().replace(b"part-00009", b"part-00010"))
    code, found = findings(root)
    assert code == 1
    hits = named(found, "CRC_MISMATCH", "sources/0/.9.compact.crc")
    assert [h["severity"] for h in hits] == ["error"], found


def drop_last_line(path: Path) -> None:
    """Cut the file at the end of its second-last line: it still parses."""
    data = path.read_bytes()
    rewrite(path, data[: data.rindex(b"\n")])


def test_compact_file_cut_at_a_line_end_is_a_warning(tmp_path: Path) -> None:
    # Spark restarts on it (test_validate_sources_spark), but re-reads batch 9's files.
    root = copy(COMPACTED, tmp_path)
    drop_last_line(root / "sources/0/9.compact")
    code, found = findings(root)
    assert code == 0
    hits = named(found, "TRUNCATED_FILE", "sources/0/9.compact")
    assert [h["severity"] for h in hits] == ["warning"] and "batch 9" in hits[0]["message"]


# -- --deep verifies every checksum sidecar ------------------------------------------------------


def _flip_in_place(path: Path) -> None:
    """Change one byte without touching the file's sidecar (a stale .crc)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "where",
    [
        "sources/0/4",
        "state/0/_metadata/metadata",
        "state/0/0/_metadata/schema",
        "offsets/{first}",
        "commits/{first}",
    ],
)
def test_deep_verifies_every_hadoop_crc(where: str, tmp_path: Path) -> None:
    root = copy(COMPACTED, tmp_path)
    first = min(int(p.name) for p in (root / "offsets").iterdir() if p.name.isdigit())
    rel = where.format(first=first)
    _flip_in_place(root / rel)
    crc = str(Path(rel).parent / f".{Path(rel).name}.crc")
    _, found = findings(root, "--deep")
    assert named(found, "CRC_MISMATCH", crc), found


def test_deep_verifies_sst_crcs(tmp_path: Path) -> None:
    root = copy(ROCKS, tmp_path)
    sst = next(p for p in sorted((root / "state/0/0/SSTs").glob("*.sst")))
    crc = sst.parent / f".{sst.name}.crc"
    assert crc.exists()
    data = bytearray(crc.read_bytes())
    data[-1] ^= 0xFF
    crc.write_bytes(bytes(data))
    _, found = findings(root, "--deep")
    assert named(found, "CRC_MISMATCH", str(crc.relative_to(root))), found


def test_kafka_style_initial_offset_file(tmp_path: Path) -> None:
    """A second source whose sources/<n>/0 is an initial offset file: a zero byte, v1 and
    the offset JSON (Kafka), checked without being taken for a file source log."""
    root = copy(COMPACTED, tmp_path)
    kafka = root / "sources/1"
    kafka.mkdir()
    (kafka / "0").write_bytes(b'\x00v1\n{"topic":{"0":0}}')
    code, found = findings(root, "--fail-on", "warning")
    assert code == 0, found
    (kafka / "0").write_bytes(b'\x00v1\n{"topic":{"0":')
    code, found = findings(root)
    assert named(errors(found, "CORRUPT_FILE"), "CORRUPT_FILE", "sources/1/0"), found
    shutil.rmtree(kafka)
