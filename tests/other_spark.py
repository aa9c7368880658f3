"""Restarts with another Spark than the test's PySpark (4.3): the pinned PySpark of a Spark
line, installed by ``./scripts/bootstrap spark`` in ``.fixture-venvs/`` (where
``fixtures/generate.py`` keeps its writers), run as a separate process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import REPO, Case
from tests.fixture_queries import GEN

WORKER = REPO / "tests" / "spark_restart_worker.py"


def python_of(version: str) -> Path:
    """The interpreter of the venv with Spark ``version``'s PySpark (e.g. ``4.0``)."""
    return Path(GEN.VENVS) / str(GEN.VENV_NAMES[version]) / "bin" / "python"


def restart_with(
    version: str, case: Case, checkpoint: Path, input_dir: Path, confs: dict[str, str]
) -> dict[str, Any]:
    """Restart ``case``'s query on ``checkpoint`` with Spark ``version`` (``confs`` over the
    case's own) until ``input_dir`` is processed: ``{"ok", "error", "emitted"}``."""
    python = python_of(version)
    env = {**os.environ, "PYSPARK_PYTHON": str(python), "TZ": "UTC"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(python), str(WORKER), case.name, str(checkpoint), str(input_dir), json.dumps(confs)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise AssertionError(f"Spark {version} worker failed: {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    result["emitted"] = {int(b): rows for b, rows in result["emitted"].items()}
    return result


def have(version: str) -> bool:
    return python_of(version).exists() and sys.platform != "win32"
