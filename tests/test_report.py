"""``ckpt report``: the page's figures against the files on disk, and that it is offline."""

from __future__ import annotations

import json
import re
from pathlib import Path

import ckpt_cli
from ckpt_cli.report import PLOT_IDS, state_sizes
from tests.conftest import CASES_DIR, run_cli
from tests.test_batches import copy_checkpoint

JOIN = CASES_DIR / "spark4-join" / "checkpoint"
HDFS = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"


def _plot_data(page: str, div: str) -> list[dict[str, object]]:
    """The traces plotly will draw in ``div`` (the JSON passed to Plotly.newPlot)."""
    match = re.search(rf'Plotly\.newPlot\(\s*"{div}",\s*(\[.*?\]),\s*\{{', page, re.S)
    assert match, f"no plot {div}"
    data: list[dict[str, object]] = json.loads(match.group(1))
    return data


def test_state_sizes_are_the_bytes_on_disk_per_partition_and_version() -> None:
    sizes = state_sizes(ckpt_cli.open(str(HDFS)))
    assert sizes.rows and sizes.versions
    for row, cells in zip(sizes.rows, sizes.bytes, strict=True):
        op, _store, part = row.split("/")
        folder = HDFS / "state" / op / part
        for version, cell in zip(sizes.versions, cells, strict=True):
            on_disk = [
                p.stat().st_size
                for p in folder.iterdir()
                if p.name in (f"{version}.delta", f"{version}.snapshot")
            ]
            assert cell == (sum(on_disk) if on_disk else None), (row, version)


def test_report_page_is_self_contained_with_every_plot(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = run_cli("report", str(JOIN), "-o", str(out), "--json")
    assert result.exit_code == 0, result.stderr
    data = result.json()
    assert data["output"] == str(out) and data["bytes"] == out.stat().st_size
    page = out.read_text()
    # Offline: no script, style or frame fetched from anywhere.
    assert not re.search(r'<(script|link|iframe|img)[^>]+(src|href)=["\']?(https?:)?//', page)
    for div in PLOT_IDS:
        assert f'id="{div}"' in page
    (heat,) = _plot_data(page, "state-heatmap")
    sizes = state_sizes(ckpt_cli.open(str(JOIN)))
    assert heat["y"] == sizes.rows and heat["z"] == sizes.bytes
    assert len(sizes.rows) == data["state_partitions"] == 4 * 2  # 4 stores, 2 partitions
    by_class = _plot_data(page, "bytes-by-class")
    du = run_cli("du", str(JOIN), "--json").json()
    for trace, figure in zip(by_class, ("bytes", "files"), strict=True):
        shown = dict(zip(trace["x"], trace["y"], strict=True))  # type: ignore[call-overload]
        assert shown == {k: u[figure] for k, u in du["by_class"].items()}


def test_report_shows_the_damage_validate_finds(tmp_path: Path) -> None:
    ckpt = copy_checkpoint(tmp_path, HDFS)
    latest = max(int(p.name) for p in (ckpt / "offsets").iterdir() if p.name.isdigit())
    (ckpt / "commits" / str(latest)).unlink()
    (ckpt / "offsets" / str(latest)).write_text("v1\n{not json")
    out = tmp_path / "r.html"
    result = run_cli("report", str(ckpt), "-o", str(out), "--json")
    assert result.exit_code == 0, result.stderr
    data = result.json()
    assert data["headline"]["restartable"] is False
    assert data["validation"]["status"] == "problems" and data["validation"]["findings"] > 0
    page = out.read_text()
    assert 'Restartable</th><td><span class="error">no</span>, because' in page
    assert 'class="error">error</td>' in page
    # Each finding with what to do about it, in a column of its own.
    assert "<th>What to do</th>" in page
    finding = run_cli("validate", str(ckpt), "--json").json()["findings"][0]
    assert f"<td>{finding['hint']}</td>" in page.replace("&#x27;", "'").replace("&quot;", '"')


def test_no_watermark_no_empty_chart(tmp_path: Path) -> None:
    # spark4-hdfs-agg sets no watermark (every batchWatermarkMs is 0); spark4-join does.
    for ckpt, charts in ((HDFS, ["planned"]), (JOIN, ["planned", "watermark"])):
        out = tmp_path / f"{ckpt.parent.name}.html"
        assert run_cli("report", str(ckpt), "-o", str(out)).exit_code == 0
        page = out.read_text()
        traces = _plot_data(page, "batch-timeline")
        assert ("watermark" in [t.get("name") for t in traces]) == ("watermark" in charts)
        assert ("No watermark" in page) == ("watermark" not in charts)


def test_report_of_something_not_a_checkpoint_is_one_line_exit_2(tmp_path: Path) -> None:
    result = run_cli("report", str(tmp_path), "-o", str(tmp_path / "r.html"))
    assert result.exit_code == 2
    assert result.stderr.startswith("error:") and "Traceback" not in result.stderr
    assert not (tmp_path / "r.html").exists()
