"""PySpark tier: the real query restarts on a cleaned checkpoint and produces what it produces
on an untouched copy.

For each Spark 4 fixture: two copies of its checkpoint, one cleaned with
``ckpt cleanup --retain 1 --apply``; the fixture's own query (from fixtures/generate.py) is
restarted on each with one more input file, into a memory sink; the rows it emits must be
equal. The input files sit at the path the checkpoint's source log recorded, so the file
source sees exactly the files it saw when the fixture was made.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CASES, REPO, Case, run_cli
from tests.spark_support import spark  # noqa: F401  (the session fixture)

pytestmark = pytest.mark.slow


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("fixture_generate", REPO / "fixtures/generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["fixture_generate"] = module
    spec.loader.exec_module(module)
    return module


GEN = _generator()
SPARK4 = [
    pytest.param(c, id=c.name)
    for c in CASES
    if c.expected.get("spark_version", "").startswith("4") and "crash" not in c.name
]


def recorded_input_dir(case: Case) -> Path:
    """Where the fixture's file source read its input (from the source log)."""
    logs = sorted((case.checkpoint / "sources" / "0").glob("[0-9]*"))
    for line in logs[0].read_text().splitlines()[1:]:
        path = json.loads(line)["path"].removeprefix("file://")
        parent = Path(path).parent
        # Joins read input/left and input/right.
        return parent.parent if parent.name in ("left", "right") else parent
    raise AssertionError(f"no source log in {case.name}")


def age(root: Path) -> None:
    when = time.time() - 7200
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            os.utime(Path(dirpath) / name, (when, when))


def restart(session: Any, spec: Any, input_dir: Path, ckpt: Path) -> list[str]:
    previous = {k: session.conf.get(k, None) for k in spec.confs}
    for key, value in spec.confs.items():
        if not key.startswith("spark.master") and not key.startswith("spark.driver"):
            session.conf.set(key, value)
    try:
        df = GEN.build_stream(session, spec, input_dir)
        emitted: list[str] = []

        def collect(batch: Any, _batch_id: int) -> None:
            for r in batch.collect():
                emitted.append(json.dumps(r.asDict(recursive=True), default=str, sort_keys=True))

        # foreachBatch: a sink that, unlike the memory sink, restarts from a checkpoint.
        query = (
            df.writeStream.foreachBatch(collect)
            .outputMode(GEN.output_mode(spec))
            .option("checkpointLocation", str(ckpt))
            .start()
        )
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        return sorted(emitted)
    finally:
        for key, value in previous.items():
            if value is None:
                session.conf.unset(key)
            else:
                session.conf.set(key, value)


@pytest.mark.parametrize("case", SPARK4)
def test_restart_on_cleaned_checkpoint_equals_untouched(
    spark: Any,  # noqa: F811 - the session fixture
    case: Case,
    tmp_path: Path,
) -> None:
    spec = GEN.CASES_BY_NAME[case.name]
    input_dir = recorded_input_dir(case)
    if input_dir.exists():
        shutil.rmtree(input_dir)
    try:
        shutil.copytree(case.root / "input", input_dir)
    except OSError as exc:
        pytest.skip(f"cannot recreate the recorded input path {input_dir}: {exc}")
    try:
        for sub, rows in GEN.input_files(spec, spec.steps).items():
            GEN.write_input(input_dir / sub if sub else input_dir, spec.steps, rows)
        untouched = tmp_path / "untouched"
        cleaned = tmp_path / "cleaned"
        shutil.copytree(case.checkpoint, untouched)
        shutil.copytree(case.checkpoint, cleaned)
        age(cleaned)
        result = run_cli("cleanup", str(cleaned), "--retain", "1", "--apply", "--yes", "--json")
        assert result.exit_code == 0, result.stderr
        assert result.json()["result"]["deleted"] > 0
        want = restart(spark, spec, input_dir, untouched)
        got = restart(spark, spec, input_dir, cleaned)
        assert got == want
        assert want, "the restarted query produced no rows: the comparison would prove nothing"
    finally:
        shutil.rmtree(input_dir.parent, ignore_errors=True)
