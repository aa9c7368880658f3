"""Every optional dependency, made to fail to import in this process: the command that needs
it says which extra to install, in one line, exit 2 (never "internal error")."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import ckpt_cli
from ckpt_cli.errors import MissingExtraError
from tests.conftest import CASES_DIR, CliResult, run_cli

CHECKPOINT = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"


def hide(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Make ``import name`` (and of its submodules, loaded or not) raise ImportError."""
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        monkeypatch.setitem(sys.modules, loaded, None)
    monkeypatch.setitem(sys.modules, name, None)


def missing_extra_error(result: CliResult) -> tuple[str, str]:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("hint: "), lines
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    return lines[0], lines[1]


def test_report_without_plotly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    hide(monkeypatch, "plotly")
    page = tmp_path / "report.html"
    line, hint = missing_extra_error(run_cli("report", str(CHECKPOINT), "-o", str(page)))
    assert line == "error: ckpt report needs the 'report' extra: pip install 'spark-ckpt[report]'"
    assert hint.startswith("hint: plotly could not be imported"), hint
    assert not page.exists()


def test_report_without_plotly_says_so_before_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    # Checked first: a missing checkpoint is not what it reports (nor listed, on a store).
    hide(monkeypatch, "plotly")
    line, _ = missing_extra_error(run_cli("report", "/nonexistent/ckpt"))
    assert "needs the 'report' extra" in line


@pytest.mark.parametrize(
    ("url", "scheme", "module", "extra"),
    [
        ("gs://bucket/ckpt/q1", "gs", "gcsfs", "gcs"),
        ("s3://bucket/ckpt/q1", "s3", "s3fs", "s3"),
        ("abfs://c@acct.dfs.core.windows.net/q1", "abfs", "adlfs", "azure"),
    ],
)
def test_object_store_without_its_library(
    monkeypatch: pytest.MonkeyPatch, url: str, scheme: str, module: str, extra: str
) -> None:
    hide(monkeypatch, module)
    line, hint = missing_extra_error(run_cli("versions", url))
    assert line == (
        f"error: {url}: support for {scheme}:// needs the '{extra}' extra: "
        f"pip install 'spark-ckpt[{extra}]'"
    )
    assert hint.startswith(f"hint: {module} could not be imported"), hint


def test_engine_spark_without_pyspark(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    hide(monkeypatch, "pyspark")
    out = f"{tmp_path}/out/"
    result = run_cli("replay", str(CHECKPOINT), "--engine", "spark", "--output-dir", out)
    line, hint = missing_extra_error(result)
    assert line == "error: --engine spark needs the 'spark' extra: pip install 'spark-ckpt[spark]'"
    assert hint.startswith("hint: pyspark could not be imported"), hint


def test_parquet_without_pyarrow(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    hide(monkeypatch, "pyarrow")
    out = tmp_path / "state.parquet"
    result = run_cli("replay", str(CHECKPOINT), "--format", "parquet", "--output", str(out))
    line, hint = missing_extra_error(result)
    assert line == (
        "error: --format parquet needs the 'parquet' extra: pip install 'spark-ckpt[parquet]'"
    )
    assert hint.startswith("hint: pyarrow could not be imported"), hint
    assert not out.exists()


def test_to_pandas_without_pandas(monkeypatch: pytest.MonkeyPatch) -> None:
    # A library call, not a command: pandas belongs to no extra.
    rows = ckpt_cli.open(str(CHECKPOINT)).replay(operator=0)
    hide(monkeypatch, "pandas")
    with pytest.raises(MissingExtraError) as info:
        rows.to_pandas()
    assert info.value.message == "to_pandas() needs pandas: pip install pandas"
