"""``ckpt du``: where the bytes are, checked against the sizes on disk."""

from __future__ import annotations

import io
import statistics
from pathlib import Path

from rich.console import Console

import ckpt_cli
from ckpt_cli.cli.output import TextRenderer
from tests.conftest import CASES_DIR, run_cli
from tests.test_batches import copy_checkpoint

JOIN = CASES_DIR / "spark4-join" / "checkpoint"
ROCKSDB = CASES_DIR / "spark4-rocksdb-changelog" / "checkpoint"


def _disk(root: Path, under: str = "") -> tuple[int, int]:
    files = [p for p in (root / under).rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def test_json_figures_match_the_disk() -> None:
    data = run_cli("du", str(JOIN), "--json").json()
    assert (data["files"], data["bytes"]) == _disk(JOIN)
    for group in ("by_class", "by_area"):
        assert sum(u["bytes"] for u in data[group].values()) == data["bytes"]
        assert sum(u["files"] for u in data[group].values()) == data["files"]
    assert (data["by_area"]["state/"]["files"], data["by_area"]["state/"]["bytes"]) == _disk(
        JOIN, "state"
    )
    (op,) = data["operators"]
    assert (op["files"], op["bytes"]) == _disk(JOIN, "state/0")
    assert [s["name"] for s in op["stores"]] == [
        "left-keyToNumValues",
        "left-keyWithIndexToValue",
        "right-keyToNumValues",
        "right-keyWithIndexToValue",
    ]
    for store in op["stores"]:
        sizes = []
        for part in store["partitions"]:
            assert (part["files"], part["bytes"]) == _disk(JOIN, part["path"])
            sizes.append(part["bytes"])
        assert store["bytes"] == sum(sizes) and store["max_partition_bytes"] == max(sizes)
        assert store["skew"] == round(max(sizes) / statistics.median(sizes), 2)
    largest = data["largest_partitions"]
    every = [p for s in op["stores"] for p in s["partitions"]]
    assert [p["bytes"] for p in largest] == sorted((p["bytes"] for p in every), reverse=True)


def test_a_hot_partition_shows_as_skew(tmp_path: Path) -> None:
    root = copy_checkpoint(tmp_path, ROCKSDB)
    (root / "state/0/1/SSTs/000099-hot.sst").write_bytes(b"x" * 200_000)
    report = ckpt_cli.open(str(root)).disk_usage(top=1)
    (store,) = report.operators[0].stores
    assert store.skew is not None and store.skew > 1.5
    assert [p.path for p in report.largest] == ["state/0/1"]
    assert report.by_class["sst"].bytes >= 200_000


def test_tab_separated_with_tsv() -> None:
    # One line per figure, exact bytes; the test runner's stdout is not a terminal.
    out = run_cli("du", str(JOIN), "--tsv").stdout
    rows = [line.split("\t") for line in out.splitlines()]
    assert all(len(r) == 4 for r in rows)
    by = {(r[0], r[1]): (int(r[2]), int(r[3])) for r in rows}
    assert by[("total", ".")] == _disk(JOIN)
    assert by[("partition", "state/0/1/left-keyToNumValues")] == _disk(
        JOIN, "state/0/1/left-keyToNumValues"
    )
    assert by[("operator", "state/0")] == _disk(JOIN, "state/0")
    assert ("class", "hadoop_crc") in by

    summary = run_cli("du", str(JOIN), "--summarize", "--tsv").stdout
    levels = {line.split("\t")[0] for line in summary.splitlines()}
    assert "partition" not in levels and {"store", "operator", "total"} <= levels
    data = run_cli("du", str(JOIN), "--summarize", "--json").json()
    assert "partitions" not in data["operators"][0]["stores"][0]


def test_tables_in_a_pipe_as_on_a_terminal() -> None:
    # The one rule of every command: stdout not being a terminal does not change the output.
    piped = run_cli("du", str(JOIN))
    assert piped.exit_code == 0 and "\t" not in piped.stdout
    assert "By area" in piped.stdout and "By operator and store" in piped.stdout


def test_tables_on_a_terminal() -> None:
    report = ckpt_cli.open(str(JOIN)).disk_usage(top=2)
    out = TextRenderer()
    buffer = io.StringIO()
    out.console = Console(file=buffer, force_terminal=True, width=120, color_system=None)
    out.render(report)
    text = buffer.getvalue()
    for title in ("By area", "By file class", "By operator and store", "Largest 2 partitions"):
        assert title in text
    assert "state/0/0/left-keyWithIndexToValue" in text and "\t" not in text


def test_bad_input(tmp_path: Path) -> None:
    assert run_cli("du", str(JOIN), "--top", "-1").exit_code == 2
    missing = run_cli("du", str(tmp_path / "nope"), "--json")
    assert missing.exit_code == 2 and missing.json()["status"] == "error"
