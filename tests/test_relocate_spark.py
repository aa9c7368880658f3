"""PySpark tier: Spark itself judges ``ckpt relocate``.

(a) A transformWithState checkpoint copied with ``cp -r`` to a new place (its old home gone)
names its schema files by their old absolute path: Spark 4.3 fails to restart it (a join in
state format 3, which writes operator metadata v2 too, restarts: Spark does not read them). After
``ckpt relocate`` to a new home it restarts, and fed two more input files emits what the
query emits restarted in its old home. (b) A file-source query whose input folder moved:
restarted on a plain copy it fails on the input files its log names outside the new folder
("Wrong basePath") or reads them all again; relocated with ``--input OLD=NEW`` its next
batches equal the untouched query's.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Case, fixture_case, run_cli
from tests.fixture_copies import age_everything
from tests.fixture_queries import recorded_input, restart
from tests.spark_support import spark  # noqa: F401 - the session fixture
from tests.test_repartition_spark import recorded_location

pytestmark = [
    pytest.mark.slow,
    # transformWithState in PySpark warns of pandas 3 (the query runs all the same).
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support"),
]


source = fixture_case


def emitted_rows(emitted: dict[int, list[str]]) -> list[list[str]]:
    return [emitted[b] for b in sorted(emitted) if emitted[b]]


def relocated(src: Path, dest: Path, *extra: str) -> None:
    result = run_cli("relocate", str(src), str(dest), *extra, "--apply", "--yes")
    assert result.exit_code == 0, result.stdout + result.stderr


def test_a_copied_transform_with_state_checkpoint_restarts_once_relocated(
    spark: Any,  # noqa: F811 - the session fixture
    tmp_path: Path,
) -> None:
    case = source("spark4-tws-row")
    home = recorded_location(case)
    assert home is not None
    copied = tmp_path / "copied"
    shutil.copytree(case.checkpoint, copied)
    age_everything(copied)
    moved = tmp_path / "relocated"
    relocated(copied, moved)
    control = tmp_path / "control"
    shutil.rmtree(home, ignore_errors=True)
    try:
        with recorded_input(case, extra_steps=2) as input_dir:
            with pytest.raises(Exception) as failed:  # noqa: B017 - Spark's, of any class
                restart(spark, case, input_dir, copied)
            print("a plain copy fails:", str(failed.value).splitlines()[0][:400])
            assert "ckpt-fixture-gen" in str(failed.value)  # the old home it looked in
            got = restart(spark, case, input_dir, moved)
            shutil.rmtree(home, ignore_errors=True)  # what the failed restart made there
            shutil.copytree(case.checkpoint, home)  # the control, in the home it names
            want = restart(spark, case, input_dir, home)
            shutil.copytree(home, control)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert any(want.values())
    assert emitted_rows(got) == emitted_rows(want)
    assert run_cli("validate", str(moved)).exit_code == 0


def test_a_query_whose_input_moved_reads_nothing_twice_once_relocated(
    spark: Any,  # noqa: F811 - the session fixture
    tmp_path: Path,
) -> None:
    case = source("spark4-hdfs-agg")
    with recorded_input(case, extra_steps=2) as input_dir:
        want = restart(spark, case, input_dir, _copy(case, tmp_path / "control"))
        new_input = tmp_path / "moved-input"
        shutil.copytree(input_dir, new_input)
        plain = _copy(case, tmp_path / "plain")
        ours = tmp_path / "relocated"
        relocated(_copy(case, tmp_path / "source"), ours, "--input", f"{input_dir}={new_input}")
    got = restart(spark, case, new_input, ours)  # the old folder is gone: only the moved one
    assert any(want.values())
    assert emitted_rows(got) == emitted_rows(want)
    # A plain copy fails on input files it logged outside the moved folder, or reads them
    # all again (more rows than the untouched query).
    try:
        again = restart(spark, case, new_input, plain)
    except Exception as exc:  # noqa: BLE001 - Spark's own error, whatever its class
        assert "basePath" in str(exc)
    else:
        assert sum(map(len, again.values())) > sum(map(len, want.values()))


def _copy(case: Case, dest: Path) -> Path:
    shutil.copytree(case.checkpoint, dest)
    age_everything(dest)
    return dest


def test_a_copied_join_in_state_format_3_restarts_as_it_is(
    spark: Any,  # noqa: F811 - the session fixture
    tmp_path: Path,
) -> None:
    """A join in state format 3 writes operator metadata v2 with schema paths too, but Spark
    does not read them at restart: a plain copy restarts, and validate does not object."""
    case = source("spark4-join-v3-rocksdb")
    home = recorded_location(case)
    assert home is not None and not home.exists()
    copied = _copy(case, tmp_path / "copied")
    assert "SCHEMA_PATHS_ELSEWHERE" not in run_cli("validate", str(copied), "--json").stdout
    with recorded_input(case, extra_steps=2) as input_dir:
        got = restart(spark, case, input_dir, copied)
        want = restart(spark, case, input_dir, _copy(case, tmp_path / "control"))
    assert any(want.values()) and emitted_rows(got) == emitted_rows(want)
