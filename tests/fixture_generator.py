"""``fixtures/generate.py`` as a module: the fixtures' queries, restarted by the tests. It
needs only the standard library and PySpark, so the worker that restarts a query with
another PySpark (``tests/spark_restart_worker.py``) loads it the same way."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def load_generator() -> Any:
    spec = importlib.util.spec_from_file_location("fixture_generate", REPO / "fixtures/generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["fixture_generate"] = module
    spec.loader.exec_module(module)
    # Python workers cannot import it by name: its UDFs and processors go by value.
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(module)  # type: ignore[no-untyped-call]
    return module
