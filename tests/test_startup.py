"""The start-up floor of ``ckpt``: modules a run does not need stay unimported (each costs
tens of milliseconds and megabytes before any work), and what is skipped behaves the same."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from ckpt_cli.storage import Storage
from ckpt_cli.storage.local import LazyLocalFileSystem
from tests.conftest import CASES_DIR, run_cli

HDFS = str(CASES_DIR / "spark4-hdfs-agg" / "checkpoint")
ROCKSDB = str(CASES_DIR / "spark4-rocksdb-agg" / "checkpoint")

# Runs `ckpt ARGS...` in a fresh interpreter; prints the exit code and the modules imported.
SCRIPT = """
import json, sys
from ckpt_cli.cli import main
sys.argv = ["ckpt", *sys.argv[1:]]
try:
    main()
    code = 0
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def imported(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, check=True
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] in (0, None), done.stderr
    return {m.split(".")[0] for m in report["modules"]}


@pytest.mark.parametrize(
    ("args", "unneeded"),
    [
        (
            ("replay", HDFS, "-f", "jsonl", "-p", "0", "-n", "5", "-o"),
            {"pydantic", "rich", "fsspec"},
        ),
        (("replay", ROCKSDB, "--format", "parquet", "--output"), {"pydantic", "rich", "fsspec"}),
        (("versions", HDFS), {"pydantic", "fsspec", "numpy"}),
        (("repartition", HDFS, "--partitions", "3"), {"pydantic", "fsspec"}),
    ],
    ids=["replay-hdfs-jsonl", "replay-rocksdb-parquet", "versions", "repartition-dry-run"],
)
def test_a_run_imports_only_what_it_needs(
    args: tuple[str, ...], unneeded: set[str], tmp_path: Path
) -> None:
    if args[-1] in ("-o", "--output"):
        args = (*args, str(tmp_path / "out"))
    assert not unneeded & imported(*args)


def test_values_typer_would_reject_keep_its_messages() -> None:
    for option, problem in [
        (("--limit", "-1"), "Input should be greater than or equal to 0"),
        (("--limit", "x"), "Input should be a valid integer"),
        (("-p", "0", "-p", "1x"), "Input should be a valid integer"),
        (("--format", "JSONL"), "'JSONL' is not one of 'table', 'jsonl', 'csv', 'parquet'"),
    ]:
        result = run_cli("replay", HDFS, *option)
        assert result.exit_code == 2, result.stderr
        assert problem in " ".join(result.stderr.split())


def test_plain_values_are_converted(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    result = run_cli(
        "replay", HDFS, "-p", "1", "-p", "0", "--limit", "3", "-f", "jsonl", "-o", str(out)
    )
    assert result.exit_code == 0, result.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 and {r["partition_id"] for r in rows} <= {0, 1}


def test_local_paths_resolve_as_fsspec_resolves_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fsspec.implementations.local import LocalFileSystem

    monkeypatch.chdir(tmp_path)
    for path in ["a/b", "./a/b/", ".", "/x/y/", "file:///x/y", "file://rel", "local:rel", "~/q"]:
        assert LazyLocalFileSystem._strip_protocol(path) == LocalFileSystem._strip_protocol(path)


def test_local_reads_match_fsspec_and_survive_pickling(tmp_path: Path) -> None:
    from fsspec.implementations.local import LocalFileSystem

    (tmp_path / "f").write_bytes(bytes(range(100)))
    lazy, real, path = LazyLocalFileSystem(), LocalFileSystem(), str(tmp_path / "f")
    for start, end in [(None, None), (10, None), (None, 20), (-30, -5), (90, 200)]:
        assert lazy.cat_file(path, start, end) == real.cat_file(path, start=start, end=end)
    assert lazy.exists(path) and not lazy.exists(path + "x")
    storage = pickle.loads(pickle.dumps(Storage.from_url(str(tmp_path))))
    assert storage.is_local and storage.read_bytes("f", 98) == bytes([98, 99])
    storage.fs.rm_file(path)  # fsspec's own LocalFileSystem, made on first use
    assert not os.path.exists(path)
