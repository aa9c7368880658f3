"""Decompression bombs and oversized zips, built from real fixture files, on every command.

Each command must stop a bomb early: one line naming the file and the limit (exit 2, or a
``LIMIT_EXCEEDED`` finding for validate), in seconds and well under 1 GB of memory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ckpt_cli.errors import FormatError, LimitExceededError
from ckpt_cli.formats import compression, limits, records, rocksdb, rocksdb_zip
from tests import bombs
from tests.conftest import CASES_DIR, REPO, run_cli


def _copy(tmp_path: Path, name: str) -> Path:
    root = tmp_path / "ckpt"
    shutil.copytree(CASES_DIR / name / "checkpoint", root)
    return root


def _replace(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    (path.parent / f".{path.name}.crc").unlink(missing_ok=True)


def _zstd(tmp_path: Path, big: bool = False) -> tuple[Path, str]:
    root = _copy(tmp_path, "spark4-hdfs-agg-zstd")
    rel = "state/0/0/9.snapshot"  # the base of the restart version
    _replace(root / rel, bombs.zstd_bomb(root / rel, 4 << 30 if big else 256 << 20))
    return root, rel


def _lz4(tmp_path: Path, big: bool = False) -> tuple[Path, str]:
    root = _copy(tmp_path, "spark4-hdfs-agg")
    rel = "state/0/0/9.snapshot"
    _replace(root / rel, bombs.lz4_bomb(root / rel, 6 << 30 if big else 256 << 20))
    return root, rel


def _zip(tmp_path: Path, big: bool = False) -> tuple[Path, str]:
    root = _copy(tmp_path, "spark4-rocksdb-agg")
    rel = "state/0/0/10.zip"
    bombs.zip_bomb(root / rel, root / rel, 1 << 30 if big else 256 << 20)
    (root / "state/0/0/.10.zip.crc").unlink(missing_ok=True)
    return root, rel


# Small bombs (256 MiB) for the command tests, the sizes of the issue (4 GiB zstd in ~400 KB,
# 6 GiB lz4 in ~25 MB, a 1 MB zip with a 1 GiB entry) for the measured ones.
BOMBS: dict[str, Callable[[Path, bool], tuple[Path, str]]] = {
    "zstd": _zstd,
    "lz4": _lz4,
    "zip": _zip,
}

COMMANDS: dict[str, Callable[[Path, str], list[str]]] = {
    "inspect": lambda root, rel: ["inspect", str(root / rel)],
    "validate": lambda root, rel: ["validate", "--json", str(root)],
    "validate-deep": lambda root, rel: ["validate", "--deep", "--json", str(root)],
    "replay": lambda root, rel: ["replay", str(root), "--partition", "0"],
    "repair-snapshot": lambda root, rel: ["repair", "--snapshot", "--json", str(root)],
}


@pytest.fixture
def small_floor(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The default limits with a 1 MiB floor: the same checks, a sixteenth of the parsing."""
    monkeypatch.setattr(limits.Limits, "current", classmethod(lambda cls: cls(floor=1 << 20)))
    yield


def _assert_stopped(command: str, code: int, out: str, err: str, rel: str) -> None:
    if command.startswith("validate"):
        assert code == 1, err
        found = [f for f in json.loads(out)["findings"] if f["code"] == "LIMIT_EXCEEDED"]
        assert found and rel in found[0]["paths"], out
        assert "CKPT_" in found[0]["message"] + found[0]["hint"]
    elif command == "repair-snapshot":
        assert code in (1, 2), err
        assert "safety limits" in out + err and rel in out + err
    else:
        assert code == 2, out + err
        assert rel in err and "CKPT_" in err, err
        assert "Traceback" not in err and "internal error" not in err.lower()


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("bomb", list(BOMBS))
def test_bomb_is_stopped_on_every_command(
    bomb: str, command: str, tmp_path: Path, small_floor: None
) -> None:
    root, rel = BOMBS[bomb](tmp_path, False)
    started = time.monotonic()
    result = run_cli(*COMMANDS[command](root, rel))
    assert time.monotonic() - started < 20
    _assert_stopped(command, result.exit_code, result.stdout, result.stderr, rel)


_MEASURE = """
import os, resource, subprocess, sys, time
started = time.monotonic()
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
sys.stdout.write(f"{proc.returncode} {time.monotonic() - started:.2f} {peak_kb}\\n")
sys.stdout.write(proc.stdout + "\\0" + proc.stderr)
"""


def _measure(*args: str) -> tuple[int, float, int, str, str]:
    """Exit code, seconds, peak RSS in MB, stdout and stderr of ``ckpt args`` in a fresh
    process (the default limits, measured by a parent that runs nothing else)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CKPT_")}
    cmd = [sys.executable, "-c", _MEASURE, sys.executable, "-m", "ckpt_cli", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    head, _, rest = done.stdout.partition("\n")
    code, seconds, peak_kb = head.split()
    out, _, err = rest.partition("\0")
    return int(code), float(seconds), int(peak_kb) // 1024, out, err


@pytest.mark.parametrize(
    ("bomb", "command"), [("zstd", "inspect"), ("lz4", "validate"), ("zip", "replay")]
)
def test_bomb_with_default_limits_in_bounded_time_and_memory(
    bomb: str, command: str, tmp_path: Path
) -> None:
    root, rel = BOMBS[bomb](tmp_path, True)
    code, seconds, peak_mb, out, err = _measure(*COMMANDS[command](root, rel))
    _assert_stopped(command, code, out, err, rel)
    assert seconds < 15, seconds
    assert peak_mb < 1024, peak_mb


# -- the readers ---------------------------------------------------------------------------


def _plain_snapshot() -> Path:
    return CASES_DIR / "spark4-hdfs-agg-zstd" / "checkpoint" / "state/0/0/9.snapshot"


def test_zstd_bomb_stops_near_the_floor() -> None:
    data = bombs.zstd_bomb(_plain_snapshot(), 1 << 30)
    seen = 0
    with pytest.raises(LimitExceededError) as info:
        for chunk in compression.decompressed_chunks("9.snapshot", _reader(data)):
            seen += len(chunk)
    assert seen <= limits.INFLATION_FLOOR
    assert "9.snapshot" in str(info.value) and limits.INFLATION_ENV in (info.value.hint or "")


def _reader(data: bytes) -> compression.Readable:
    import io

    return io.BytesIO(data)


def test_compressible_real_data_under_the_floor_passes() -> None:
    # 8 MiB of zero records: far beyond the ratio, under the floor, so it reads.
    data = bombs.zstd_bomb(_plain_snapshot(), 8 << 20)
    total = sum(len(c) for c in compression.decompressed_chunks("x", _reader(data)))
    assert total > 8 << 20


def test_raising_the_ratio_lets_a_genuine_file_through(monkeypatch: pytest.MonkeyPatch) -> None:
    # The zeros of 32 MiB as 32 MiB lz4 blocks: ~250x, over the floor.
    data = bombs.lz4_bomb(CASES_DIR / "spark4-hdfs-agg/checkpoint/state/0/0/9.snapshot", 32 << 20)
    with pytest.raises(LimitExceededError):
        for _ in compression.decompressed_chunks("x", _reader(data)):
            pass
    monkeypatch.setenv(limits.INFLATION_ENV, "1000")
    total = sum(len(c) for c in compression.decompressed_chunks("x", _reader(data)))
    assert total > 32 << 20


def test_a_bad_limit_setting_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(limits.INFLATION_ENV, "lots")
    result = run_cli("inspect", str(_plain_snapshot()))
    assert result.exit_code == 2
    assert "CKPT_MAX_INFLATION='lots': expected a positive number" in result.stderr


def test_absolute_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(limits.DECOMPRESSED_ENV, "100")
    with pytest.raises(LimitExceededError, match=limits.DECOMPRESSED_ENV):
        for _ in compression.decompressed_chunks(
            "x", _reader(bombs.zstd_bomb(_plain_snapshot(), 1 << 20))
        ):
            pass


def test_trailing_bytes_after_the_end_marker_are_bounded() -> None:
    # A real file whose end marker is followed by a bomb: counting the trailing bytes must
    # not inflate them all.
    plain = compression.decompress("x", _plain_snapshot().read_bytes())
    data = bombs.zstd_compress(plain) + bombs.zstd_zeros(1 << 30)
    stats = records.RecordStats()
    with pytest.raises(LimitExceededError):
        for _ in records.iter_kv_records(
            "9.snapshot",
            compression.decompressed_chunks("9.snapshot", _reader(data)),
            snapshot=True,
            stats=stats,
        ):
            pass


# -- zips ----------------------------------------------------------------------------------


def _real_zip() -> Path:
    return CASES_DIR / "spark4-rocksdb-agg" / "checkpoint" / "state/0/0/10.zip"


def test_zip_bomb_is_refused_from_the_central_directory(tmp_path: Path) -> None:
    dest = tmp_path / "10.zip"
    bombs.zip_bomb(_real_zip(), dest, 1 << 30)
    with pytest.raises(LimitExceededError, match="OPTIONS-999999"):
        rocksdb_zip.read_zip("state/0/0/10.zip", dest.read_bytes())


def test_zip_entry_whose_declared_size_lies_is_not_inflated_past_it(tmp_path: Path) -> None:
    # Declared 1 KiB, inflates to 64 MiB: zipfile stops at the declared size, the CRC fails.
    data, crc = bombs.deflated_zeros(64 << 20)
    entries = bombs.real_zip_entries(_real_zip())
    entries.insert(0, ("OPTIONS-999999", zipfile.ZIP_DEFLATED, data, crc, 1024))
    dest = tmp_path / "10.zip"
    bombs.write_zip(dest, entries)
    with pytest.raises(FormatError, match="OPTIONS-999999") as info:
        rocksdb_zip.rebuild_db_dir(
            dest.read_bytes(), lambda rel: b"", tmp_path / "db", path="10.zip"
        )
    assert not isinstance(info.value, LimitExceededError)
    assert (tmp_path / "db" / "OPTIONS-999999").stat().st_size <= 1024


def test_many_zip_entries_are_refused_before_parsing_the_directory(tmp_path: Path) -> None:
    entries = bombs.real_zip_entries(_real_zip())
    empty = (zipfile.ZIP_STORED, b"", zlib.crc32(b""), 0)
    entries += [(f"OPTIONS-{i:06d}", *empty) for i in range(limits.DEFAULT_ZIP_ENTRIES + 1)]
    dest = tmp_path / "10.zip"
    bombs.write_zip(dest, entries)
    with pytest.raises(LimitExceededError, match="zip entries"):
        rocksdb_zip.read_zip("10.zip", dest.read_bytes())


def _metadata_zip(tmp_path: Path, ssts: int) -> Path:
    """The real 10.zip with its metadata listing ``ssts`` SST files."""
    entries = bombs.real_zip_entries(_real_zip())
    out = []
    for name, method, data, crc, size in entries:
        if name == rocksdb_zip.METADATA_ENTRY:
            header, _, body = data.decode().partition("\n")
            obj = json.loads(body)
            obj["sstFiles"] = [
                {
                    "localFileName": f"{i:06d}.sst",
                    "dfsSstFileName": f"{i:06d}-x.sst",
                    "sizeBytes": 1,
                }
                for i in range(ssts)
            ]
            data = (header + "\n" + json.dumps(obj)).encode()
            packed = zlib.compressobj(9, zlib.DEFLATED, -15)
            raw = packed.compress(data) + packed.flush()
            out.append((name, zipfile.ZIP_DEFLATED, raw, zlib.crc32(data), len(data)))
        else:
            out.append((name, method, data, crc, size))
    dest = tmp_path / "ckpt" / "state/0/0/10.zip"
    bombs.write_zip(dest, out)
    (dest.parent / ".10.zip.crc").unlink(missing_ok=True)
    return dest


@pytest.mark.parametrize("command", ["inspect", "validate", "replay"])
def test_huge_zip_metadata_is_refused_by_every_command(tmp_path: Path, command: str) -> None:
    # Over 16 MiB of metadata JSON: replay used to parse what inspect and validate refused.
    root = _copy(tmp_path, "spark4-rocksdb-agg")
    _metadata_zip(tmp_path, 200_000)
    result = run_cli(*COMMANDS[command](root, "state/0/0/10.zip"))
    _assert_stopped(command, result.exit_code, result.stdout, result.stderr, "state/0/0/10.zip")


def test_too_many_listed_sst_files(tmp_path: Path) -> None:
    _copy(tmp_path, "spark4-rocksdb-agg")
    dest = _metadata_zip(tmp_path, 11)
    with pytest.raises(LimitExceededError, match="SST and log files listed"):
        rocksdb_zip.read_zip("10.zip", dest.read_bytes(), limits=limits.Limits(max_shared_files=10))


@pytest.mark.parametrize("name", ["../escape", "/etc/escape", "a/../../escape", "..", "x\\..\\y"])
def test_zip_slip_names_are_refused(tmp_path: Path, name: str) -> None:
    entries = bombs.real_zip_entries(_real_zip())
    entries.insert(0, (name, zipfile.ZIP_STORED, b"boom", zlib.crc32(b"boom"), 4))
    dest = tmp_path / "10.zip"
    bombs.write_zip(dest, entries)
    with pytest.raises(FormatError, match="Spark writes flat names"):
        rocksdb_zip.rebuild_db_dir(
            dest.read_bytes(), lambda rel: b"", tmp_path / "db", path="10.zip"
        )
    assert not (tmp_path / "escape").exists() and not Path("/etc/escape").exists()


def test_rocksdb_rows_are_held_to_the_limits_against_the_files_on_disk(tmp_path: Path) -> None:
    # SST blocks are compressed as well: the rows read out are counted against the bytes of
    # the rebuilt directory (here with limits so tight the real rows exceed them).
    store = CASES_DIR / "spark4-rocksdb-agg" / "checkpoint" / "state/0/0"
    db = tmp_path / "db"
    rocksdb_zip.rebuild_db_dir(
        (store / "10.zip").read_bytes(), lambda rel: (store / rel).read_bytes(), db, path="10.zip"
    )
    assert list(rocksdb.iter_db(db, path="state/0/0/10.zip"))
    tight = limits.Limits(max_inflation=0.001, floor=0)
    with pytest.raises(LimitExceededError, match=r"state/0/0/10\.zip.*RocksDB data"):
        list(rocksdb.iter_db(db, path="state/0/0/10.zip", limits=tight))


def test_zip64_entry_count_is_read_from_the_zip64_record(tmp_path: Path) -> None:
    # Over 65,535 entries zipfile writes the zip64 end record; the count is read from it.
    dest = tmp_path / "10.zip"
    with zipfile.ZipFile(dest, "w") as archive:
        for name, _method, data, _crc, _size in bombs.real_zip_entries(_real_zip()):
            archive.writestr(name, data)
        for i in range(70_000):
            archive.writestr(f"extra-{i:06d}", b"")
    with pytest.raises(LimitExceededError, match="zip entries: 70005,"):
        rocksdb_zip.read_zip("10.zip", dest.read_bytes())


def test_zip_entry_flagged_encrypted_is_a_format_error(tmp_path: Path) -> None:
    # zipfile raises RuntimeError for it (found by fuzzing the real zip's bytes).
    data = bytearray(_real_zip().read_bytes())
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        data[at + 8] |= 1  # general purpose flag bit 0: encrypted
        at = data.find(b"PK\x01\x02", at + 4)
    with pytest.raises(FormatError, match="encrypted"):
        rocksdb_zip.read_zip("10.zip", bytes(data))
    with pytest.raises(FormatError, match="encrypted"):
        rocksdb_zip.rebuild_db_dir(bytes(data), lambda rel: b"", tmp_path / "db", path="10.zip")
