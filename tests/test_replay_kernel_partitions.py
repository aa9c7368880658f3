"""Replay's threads with the compiled kernel (Parquet decoded on as many threads as cores,
the kernel's tables not gathered, RocksDB's SST runs read by the kernel) over 1 and 400
partitions and pools of 1-8 workers, with slow batches: the output of one worker, in
partition order; a damaged partition stops it with that partition's own one-line error."""

from __future__ import annotations

import io
import itertools
import json
import shutil
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.core import kernel
from ckpt_cli.replay import parquet_file, read_state, sinks
from ckpt_cli.replay.sinks import write_partitions, write_state_parquet
from tests.conftest import CASES_DIR, run_cli
from tests.fixture_copies import age_everything

pytestmark = pytest.mark.skipif(not CASES_DIR.is_dir(), reason="no fixtures")

FIXTURES = {"hdfs": "spark4-hdfs-agg", "rocksdb": "spark4-rocksdb-agg"}


@pytest.fixture(autouse=True)
def _kernel_built() -> None:
    if kernel.load() is None:
        pytest.skip(kernel.missing() or "no kernel")


@pytest.fixture(scope="module")
def spread(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], Path]:
    """Each provider's fixture repartitioned by ckpt to 1 and to 400 partitions."""
    out = {}
    for provider, name in FIXTURES.items():
        for n in (1, 400):
            root = tmp_path_factory.mktemp(f"{provider}-{n}") / "ckpt"
            shutil.copytree(CASES_DIR / name / "checkpoint", root)
            age_everything(root)
            done = run_cli("repartition", str(root), "--partitions", str(n), "--apply", "--yes")
            assert done.exit_code == 0, done.stdout + done.stderr
            shutil.rmtree(root.parent / "ckpt.ckpt-quarantine")
            out[provider, n] = root
    return out


def _replayed(root: Path, fmt: str, workers: int) -> Any:
    rows = read_state(str(root))
    if fmt == "parquet":
        buf = io.BytesIO()
        write_state_parquet(rows, buf, workers=workers)
        return buf.getvalue()
    text = io.StringIO()
    write_partitions(rows, text, "jsonl", workers=workers)
    return text.getvalue()


def _slowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every other batch the kernel formats waits 0-3 ms first (a thread that falls behind)."""
    calls = itertools.count()
    lock = threading.Lock()

    def slow(original: Any) -> Any:
        def wrapper(*args: Any) -> Any:
            with lock:
                n = next(calls)
            if n % 2 == 0:
                time.sleep(0.001 * (n % 4))
            return original(*args)

        return wrapper

    monkeypatch.setattr(kernel.Formatter, "jsonl", slow(kernel.Formatter.jsonl))
    monkeypatch.setattr(kernel.Formatter, "arrays", slow(kernel.Formatter.arrays))


@pytest.mark.parametrize("provider", ["hdfs", "rocksdb"])
@pytest.mark.parametrize("n", [1, 400])
@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_1_to_400_partitions_in_order_on_any_pool_with_slow_batches(
    provider: str,
    n: int,
    fmt: str,
    spread: dict[tuple[str, int], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = spread[provider, n]
    # A row group per row, none encoded alone: many for the Parquet encoders (one per
    # worker) to share.
    monkeypatch.setattr(sinks, "ROW_GROUP_ROWS", 1)
    monkeypatch.setattr(parquet_file, "SERIAL_ROW_GROUPS", 0)
    expected = _replayed(root, fmt, 1)
    _slowed(monkeypatch)
    for workers in (1, 2, 3, 8):
        got = _replayed(root, fmt, workers)
        if fmt == "parquet":
            import pyarrow.parquet as pq

            assert got == expected, workers  # the same file, byte for byte
            ids = pq.read_table(io.BytesIO(got)).column("partition_id").to_pylist()
        else:
            assert got == expected, workers
            ids = [int(line.split(",", 1)[0].split(":")[1]) for line in got.splitlines()]
        assert ids == sorted(ids) and len(ids) > 0


def _damage(root: Path, provider: str) -> str:
    """Bytes changed in the data the latest version of one partition holds: the largest SST
    a partition's newest zip names (RocksDB), or the largest newest snapshot (HDFS); its path
    in the checkpoint."""
    files: list[Path] = []
    if provider == "rocksdb":
        for partition in (root / "state" / "0").iterdir():
            zips = sorted(partition.glob("*.zip"), key=lambda p: int(p.stem))
            if zips:
                with zipfile.ZipFile(zips[-1]) as z:
                    names = json.loads(z.read("metadata").decode().split("\n", 1)[1])
                files += [partition / "SSTs" / f["dfsSstFileName"] for f in names["sstFiles"]]
    else:
        snapshots = sorted(root.glob("state/0/*/*.snapshot"), key=lambda p: int(p.stem))
        files = [p for p in snapshots if p.stem == snapshots[-1].stem]
    target = max(files, key=lambda p: (p.stat().st_size, str(p)))
    data = bytearray(target.read_bytes())
    data[20:28] = bytes(b ^ 0xFF for b in data[20:28])
    target.write_bytes(bytes(data))
    return target.relative_to(root).as_posix()


@pytest.mark.parametrize("provider", ["hdfs", "rocksdb"])
@pytest.mark.parametrize("n", [1, 400])
@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_damaged_partition_among_1_or_400_is_its_own_one_line_error(
    provider: str,
    n: int,
    fmt: str,
    spread: dict[tuple[str, int], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With slow batches, and the Parquet encoders sharing a row group per row, the replay
    stops on every pool with the damaged file's own error, and no encoder thread is left."""
    root = tmp_path / "ckpt"
    shutil.copytree(spread[provider, n], root)
    damaged = _damage(root, provider)
    monkeypatch.setattr(sinks, "ROW_GROUP_ROWS", 1)
    monkeypatch.setattr(parquet_file, "SERIAL_ROW_GROUPS", 0)
    _slowed(monkeypatch)
    errors = set()
    for workers in ("1", "2", "3", "8"):
        out = tmp_path / f"out-{workers}.{fmt}"
        done = run_cli("replay", str(root), "--format", fmt, "-o", str(out), "--workers", workers)
        assert done.exit_code == 2, done.stdout + done.stderr
        lines = done.stderr.strip().splitlines()
        assert lines[0].startswith(f"error: {damaged}"), done.stderr
        assert "Traceback" not in done.stderr and len(lines) <= 2  # the error and its hint
        errors.add(lines[0])
        encoders = [t for t in threading.enumerate() if t.name.startswith("ckpt-parquet-")]
        assert encoders == []
    assert len(errors) == 1
