"""Restarting a fixture's own streaming query (from fixtures/generate.py) on a checkpoint copy,
for the PySpark-tier tests of cleanup and repair."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.conftest import Case, run_cli
from tests.fixture_generator import load_generator

GEN = load_generator()


def recorded_input_dir(case: Case) -> Path:
    """Where the fixture's file source read its input (from the source log)."""
    for log in sorted((case.checkpoint / "sources" / "0").glob("[0-9]*")):
        for line in log.read_text().splitlines()[1:]:
            path = json.loads(line)["path"].removeprefix("file://")
            parent = Path(path).parent
            # Joins read input/left and input/right.
            return parent.parent if parent.name in ("left", "right") else parent
    raise AssertionError(f"no source log in {case.name}")


@contextmanager
def recorded_input(case: Case, extra_steps: int = 1) -> Iterator[Path]:
    """The fixture's input files at the path its source log recorded (so the file source sees
    the files it saw), plus ``extra_steps`` more input files; removed afterwards."""
    spec = GEN.CASES_BY_NAME[case.name]
    input_dir = recorded_input_dir(case)
    if input_dir.exists():
        shutil.rmtree(input_dir)
    shutil.copytree(case.root / "input", input_dir)
    try:
        done = len(list((case.root / "input").rglob("*.json")))
        per_step = max(1, len(GEN.input_files(spec, 0)))
        first = done // per_step
        for step in range(first, first + extra_steps):
            for sub, rows in GEN.input_files(spec, step).items():
                GEN.write_input(input_dir / sub if sub else input_dir, step, rows)
        yield input_dir
    finally:
        shutil.rmtree(input_dir.parent, ignore_errors=True)


def copy_checkpoint(case: Case, dest: Path) -> Path:
    """A copy of the fixture's checkpoint that Spark can restart: a transformWithState
    checkpoint (operator metadata v2 naming its schema files by absolute path) is relocated
    with ``ckpt relocate``, any other copied."""
    if not any(case.checkpoint.glob("state/*/_metadata/v2")):
        shutil.copytree(case.checkpoint, dest)
        return dest
    moved = run_cli("relocate", str(case.checkpoint), str(dest), "--apply", "--yes", "--force")
    assert moved.exit_code == 0, moved.stdout + moved.stderr
    return dest


def beside_control(
    session: Any, case: Case, ours: Path, control: Path, extra_steps: int = 2
) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """The query restarted on an untouched copy of the fixture (made at ``control``) and on
    ``ours``, each fed the same ``extra_steps`` more input files: what each emitted."""
    copy_checkpoint(case, control)
    with recorded_input(case, extra_steps=extra_steps) as input_dir:
        return restart(session, case, input_dir, control), restart(session, case, input_dir, ours)


def restart(session: Any, case: Case, input_dir: Path, ckpt: Path) -> dict[int, list[str]]:
    """Run the fixture's query on ``ckpt`` until its input is processed; the rows it emitted,
    by batch id (a foreachBatch sink: unlike the memory sink, it restarts from a checkpoint)."""
    spec = GEN.CASES_BY_NAME[case.name]
    previous = {k: session.conf.get(k, None) for k in spec.confs}
    for key, value in spec.confs.items():
        if not key.startswith(("spark.master", "spark.driver")):
            session.conf.set(key, value)
    emitted: dict[int, list[str]] = {}
    try:
        df = GEN.build_stream(session, spec, input_dir)

        def collect(batch: Any, batch_id: int) -> None:
            emitted[batch_id] = sorted(
                json.dumps(r.asDict(recursive=True), default=str, sort_keys=True)
                for r in batch.collect()
            )

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
        return emitted
    finally:
        for key, value in previous.items():
            if value is None:
                session.conf.unset(key)
            else:
                session.conf.set(key, value)
