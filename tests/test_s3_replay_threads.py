"""JSON lines of a columnar store on S3 (moto server) are replayed in threads, as on local
disk, with the bytes the local replay writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.replay import sinks
from tests.conftest import CASES, run_cli
from tests.servers import S3Server
from tests.test_object_stores import copy_case, upload

pytestmark = pytest.mark.skipif(not CASES, reason="no fixtures")


@pytest.mark.parametrize("name", ["spark4-hdfs-agg", "spark4-rocksdb-changelog"])
def test_s3_json_lines_take_the_threaded_path_and_write_the_local_bytes(
    name: str, s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = copy_case(name, tmp_path)
    url = upload(s3_server, local)
    threaded: list[int] = []
    real = sinks._write_threads

    def spy(rows: Any, out: Any, workers: int, progress: Any) -> int:
        threaded.append(len(rows.plans))
        return real(rows, out, workers, progress)

    monkeypatch.setattr(sinks, "_write_threads", spy)
    outputs: list[bytes] = []
    for source, options in ((str(local), ()), (url, s3_server.cli_options())):
        threaded.clear()
        out = tmp_path / f"{len(outputs)}.jsonl"
        args = ("replay", source, "--format", "jsonl", "-o", str(out), "--workers", "2")
        result = run_cli(*args, *options)
        assert result.exit_code == 0, result.stderr
        outputs.append(out.read_bytes())
    assert outputs[0] and outputs[1] == outputs[0]
    # On S3, several partitions in threads (locally, RocksDB's go to processes instead).
    assert len(threaded) == 1 and threaded[0] > 1
