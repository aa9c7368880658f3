"""Partitions replayed side by side (threads for columnar HDFS stores, processes for RocksDB
and for the row path) give the text one process gives, and the CLI leaves pandas out while it
writes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from ckpt_cli.core import kernel
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.replay.sinks import _pool
from ckpt_cli.state.reader import ReadOptions, target_rows
from ckpt_cli.state.target import resolve_target
from tests.conftest import CASES, CASES_DIR, run_cli

pytestmark = pytest.mark.skipif(not CASES, reason="no fixtures")

REPO = Path(__file__).resolve().parents[1]
# Columnar stores of several partitions: HDFS deltas+snapshots, RocksDB, lz4/zstd/snappy.
COLUMNAR = ["spark4-hdfs-agg", "spark4-hdfs-agg-zstd", "spark4-rocksdb-changelog", "spark4-dedup"]


@pytest.mark.parametrize("name", COLUMNAR)
def test_threads_write_the_text_of_one_process(name: str, tmp_path: Path) -> None:
    ckpt = str(CASES_DIR / name / "checkpoint")
    texts = []
    for workers in ("1", "2"):
        out = tmp_path / f"{workers}.jsonl"
        result = run_cli("replay", ckpt, "--format", "jsonl", "-o", str(out), "--workers", workers)
        assert result.exit_code == 0, result.stderr
        texts.append(out.read_bytes())
    assert texts[0] and texts[0] == texts[1]  # same lines, same partition order
    stdout = run_cli("replay", ckpt, "--format", "jsonl", "--workers", "2")
    assert stdout.exit_code == 0 and stdout.stdout.encode() == texts[0]


def test_columnar_partitions_go_to_threads_the_row_path_and_rocksdb_to_processes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ckpt_cli.replay import sinks

    ckpt = Checkpoint.open(str(CASES_DIR / "spark4-hdfs-agg" / "checkpoint"))
    assert len(resolve_target(ckpt).partitions) > 1
    used: list[str] = []
    real_pool, real_threads = sinks._pool, sinks._write_threads

    def pool(*args: object) -> object:
        used.append("processes")
        return real_pool(*args)  # type: ignore[arg-type]

    def threads(*args: object) -> int:
        used.append("threads")
        return real_threads(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(sinks, "_pool", pool)
    monkeypatch.setattr(sinks, "_write_threads", threads)
    for where, expected in (((), "threads"), ((("k", "k3"),), "processes")):
        rows = target_rows(ckpt, resolve_target(ckpt), ReadOptions(where=where))
        used.clear()
        sinks.write_partitions(rows, io.StringIO(), "jsonl", workers=2)
        # Rows filtered by key are decoded row by row: in processes.
        assert used == [expected]
    with _pool(rows, 2) as pool_:
        assert type(pool_) is ProcessPoolExecutor
    # RocksDB's pairs, decoded under the GIL without the compiled kernel: a process per
    # partition; with it, threads.
    rocksdb = Checkpoint.open(str(CASES_DIR / "spark4-rocksdb-changelog" / "checkpoint"))
    rows = target_rows(rocksdb, resolve_target(rocksdb))
    assert len(rows.plans) > 1 and {plan.provider for plan in rows.plans} == {"rocksdb"}
    for enabled, expected in ((False, "processes"), (True, "threads")):
        monkeypatch.setattr(kernel, "ENABLED", enabled)
        if enabled and kernel.load() is None:
            continue  # not built here
        used.clear()
        sinks.write_partitions(rows, io.StringIO(), "jsonl", workers=2)
        assert used == [expected]


def test_cli_replay_does_not_import_pandas(tmp_path: Path) -> None:
    ckpt = str(CASES_DIR / "spark4-hdfs-agg" / "checkpoint")
    script = (
        "import sys\n"
        "from ckpt_cli.cli import app\n"
        "try:\n"
        f"    app([ 'replay', {ckpt!r}, '--format', sys.argv[1], '-o', sys.argv[2]])\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        "print('pandas' in sys.modules)\n"
        "import pyarrow.parquet as pq\n"
        "print(type(pq.read_table(sys.argv[2]).to_pandas()).__name__ if sys.argv[1] == 'parquet'"
        " else 'DataFrame')\n"
    )
    for fmt in ("jsonl", "parquet"):
        out = tmp_path / f"out.{fmt}"
        done = subprocess.run(
            [sys.executable, "-c", script, fmt, str(out)],
            capture_output=True,
            text=True,
            cwd=REPO,
            check=True,
        )
        # Left out while writing; importable (and to_pandas works) afterwards.
        assert done.stdout.split() == ["False", "DataFrame"], done.stderr


@pytest.mark.parametrize(
    "values",
    [
        ["plain", None, "ünï ✓ 😀", ""],
        ["plain", 'a "quote"', None],
        ["back \\ slash", "ok"],
        ["ok", "tab\there", None, "\x1f"],
        [None, None],
    ],
)
def test_quoted_strings_are_what_json_writes(values: list[str | None]) -> None:
    import pyarrow as pa

    from ckpt_cli.state.plain_arrow import _quoted

    array = pa.array(["pad \\ \x01", *values], pa.string())[1:]  # a slice: offsets not at 0
    want = [json.dumps(v if v is not None else "", ensure_ascii=False) for v in values]
    assert _quoted(array).to_pylist() == want


def test_rocksdb_parquet_goes_to_processes_and_hdfs_parquet_to_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ckpt_cli.replay import sinks

    used: list[str] = []
    real_pool = sinks._pool

    def pool(*args: object) -> object:
        used.append("processes")
        return real_pool(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(sinks, "_pool", pool)
    monkeypatch.setattr(kernel, "ENABLED", False)  # with it, RocksDB's go to threads too
    for name, expected in (("spark4-hdfs-agg", []), ("spark4-rocksdb-changelog", ["processes"])):
        ckpt = Checkpoint.open(str(CASES_DIR / name / "checkpoint"))
        rows = target_rows(ckpt, resolve_target(ckpt))
        assert len(rows.plans) > 1
        used.clear()
        count = sinks.write_state_parquet(rows, io.BytesIO(), workers=2)
        assert count > 0 and used == expected


@pytest.mark.parametrize("compiled", [False, True])  # in processes, or (the kernel) threads
def test_an_error_in_a_rocksdb_process_is_the_one_line_of_one_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiled: bool
) -> None:
    import shutil

    monkeypatch.setattr(kernel, "ENABLED", compiled)

    from ckpt_cli.errors import CkptError
    from ckpt_cli.replay import read_state
    from ckpt_cli.replay.sinks import write_state_parquet

    root = tmp_path / "ckpt"
    shutil.copytree(CASES_DIR / "spark4-rocksdb-changelog" / "checkpoint", root)
    snapshot = root / "state/0/1/10.zip"  # the latest version's: replay reads it
    snapshot.write_bytes(snapshot.read_bytes()[:-7])  # cut inside its central directory
    errors = []
    for workers in (1, 2):
        with pytest.raises(CkptError) as caught:
            write_state_parquet(read_state(str(root)), io.BytesIO(), None, workers)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and "10.zip" in errors[0]


@pytest.mark.parametrize("name", ["spark4-hdfs-agg-200", "spark4-hdfs-agg"])
def test_parquet_is_the_same_table_on_any_number_of_workers(name: str, tmp_path: Path) -> None:
    """Parquet of 200 partitions: decoded on ``workers - 1`` threads, several partitions to a
    batch, while this thread encodes; the table is the one a single thread writes, row for
    row, and its rows are the reader's."""
    pq = pytest.importorskip("pyarrow.parquet")
    ckpt = str(CASES_DIR / name / "checkpoint")
    tables = []
    for workers in ("1", "2", "3", "8"):
        out = tmp_path / f"{workers}.parquet"
        result = run_cli(
            "replay", ckpt, "--format", "parquet", "-o", str(out), "--workers", workers
        )
        assert result.exit_code == 0, result.stderr
        tables.append(pq.read_table(out))
    assert tables[0].num_rows > 0
    assert all(table.equals(tables[0]) for table in tables[1:])
    opened = Checkpoint.open(ckpt)
    rows = list(target_rows(opened, resolve_target(opened)))
    assert tables[0].to_pylist() == rows
