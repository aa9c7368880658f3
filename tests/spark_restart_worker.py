"""Restart a fixture's streaming query on a checkpoint with another PySpark than the test's
(``tests/other_spark.py`` runs it with ``.fixture-venvs/<version>/bin/python``), and print
what it did as one JSON line on stdout: ``{"ok": bool, "error": str, "emitted": {batch:
rows}}``. It imports only the fixture generator (``tests/fixture_generator.py``) and
PySpark, which that venv has.

    python tests/spark_restart_worker.py CASE CHECKPOINT INPUT_DIR CONFS_JSON
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

# The repository on the path: the worker runs as a script, by another Python.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fixture_generator import load_generator  # noqa: E402


def main(case: str, checkpoint: str, input_dir: str, confs: str) -> int:
    gen = load_generator()
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spec = gen.CASES_BY_NAME[case]
    settings = {**spec.confs, **json.loads(confs)}
    for key, value in settings.items():
        if not key.startswith(("spark.master", "spark.driver")):
            spark.conf.set(key, value)
    emitted: dict[int, list[str]] = {}

    def collect(batch: Any, batch_id: int) -> None:
        emitted[batch_id] = sorted(
            json.dumps(r.asDict(recursive=True), default=str, sort_keys=True)
            for r in batch.collect()
        )

    result: dict[str, Any] = {"ok": True, "error": ""}
    query = (
        gen.build_stream(spark, spec, Path(input_dir))
        .writeStream.foreachBatch(collect)
        .outputMode(gen.output_mode(spec))
        .option("checkpointLocation", checkpoint)
        .start()
    )
    try:
        query.processAllAvailable()
    except Exception as exc:  # noqa: BLE001 - a failed restart is the result
        result = {"ok": False, "error": str(exc)[:4000]}
    finally:
        query.stop()
    result["emitted"] = {str(b): rows for b, rows in sorted(emitted.items())}
    print(json.dumps(result))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
