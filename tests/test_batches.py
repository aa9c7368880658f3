"""``ckpt batches``: one row per batch, on real Spark checkpoints and damaged copies of them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import ckpt_cli
from ckpt_cli.batches import batch_timeline
from ckpt_cli.formats import logs
from ckpt_cli.units import iso_ms
from tests.conftest import CASES_DIR, run_cli

AGG = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"
JOIN = CASES_DIR / "spark4-join" / "checkpoint"
RATE = Path(__file__).parent / "data" / "spark43-rate" / "checkpoint"


def copy_checkpoint(tmp_path: Path, source: Path = AGG) -> Path:
    root = tmp_path / "ckpt"
    shutil.copytree(source, root)
    return root


def _offsets(root: Path, batch: int) -> logs.OffsetSeq:
    return logs.parse_offsets("o", batch, (root / "offsets" / str(batch)).read_bytes())


def _set_source_offsets(root: Path, values: dict[int, list[str]]) -> None:
    """Rewrite the source lines of offsets/<batch> (a Kafka or rate query's offsets)."""
    for batch, offsets in values.items():
        path = root / "offsets" / str(batch)
        header, meta = path.read_text().split("\n")[:2]
        path.write_text("\n".join([header, meta, *offsets]))
        (root / "offsets" / f".{batch}.crc").unlink(missing_ok=True)


def test_file_source_rows_match_the_logs() -> None:
    report = batch_timeline(ckpt_cli.open(str(AGG)), now_ms=1_795_382_231_959 + 90_000)
    assert [r.batch for r in report.batches] == [6, 7, 8, 9]
    for row in report.batches:
        seq = _offsets(AGG, row.batch)
        assert row.state == "committed" and row.committed
        assert row.planned_ms == seq.batch_timestamp_ms
        assert row.planned == iso_ms(seq.batch_timestamp_ms)
        assert row.watermark is None  # 0: no watermark in this query
    last = report.batches[-1]
    assert last.age_seconds == 90.0
    # The first retained batch: the offsets entry before it is purged, so what it read is not
    # known; the next ones read log batch N, whose file lists one input file (9 from 9.compact).
    assert report.batches[0].sources[0].files_added is None
    for row in report.batches[1:]:
        (source,) = row.sources
        assert source.kind == "file" and source.log_batches == [row.batch]
        assert source.files is not None and len(source.files) == source.files_added == 1
        assert source.files[0].endswith(f"part-{row.batch:05d}.json")


def test_no_data_batches_of_a_join_read_nothing() -> None:
    # The stream-stream join ran batches that only moved the watermark (no new files).
    rows = batch_timeline(ckpt_cli.open(str(JOIN))).batches
    added = {r.batch: [s.files_added for s in r.sources] for r in rows}
    assert added[17] == [0, 0] and added[18] == [1, 1]
    assert rows[-1].watermark is not None and rows[-1].watermark.startswith("2024-01-01T")


def test_gap_and_in_flight_batches(tmp_path: Path) -> None:
    root = copy_checkpoint(tmp_path)
    (root / "offsets" / "7").unlink()  # a hole in offsets/ (its commit stays)
    (root / "commits" / "8").unlink()  # planned, not committed, and a later batch committed
    report = batch_timeline(ckpt_cli.open(str(root)))
    states = {r.batch: r.state for r in report.batches}
    assert states == {6: "committed", 7: "offsets-missing", 8: "not-committed", 9: "committed"}
    assert report.offsets_gaps == [7] and report.commits_gaps == [8]
    # After the hole, what batch 8 read is unknown; batch 9 follows 8 again.
    assert report.batches[2].sources[0].files_added is None
    assert report.batches[3].sources[0].files_added == 1

    (root / "commits" / "9").unlink()  # now 8 and 9 run after the last commit (7)
    report = batch_timeline(ckpt_cli.open(str(root)))
    assert [r.state for r in report.batches[2:]] == ["in-flight", "in-flight"]
    assert report.in_flight == [8, 9] and report.latest_committed == 7

    text = run_cli("batches", str(root))
    assert text.exit_code == 0
    for word in ("offsets-missing", "in-flight", "in flight 8, 9", "last committed 7"):
        assert word in text.stdout


def test_unreadable_offsets_entry_is_a_row(tmp_path: Path) -> None:
    root = copy_checkpoint(tmp_path)
    (root / "offsets" / "9").write_text('v1\n{"batchWatermarkMs":0,"batchTim')
    result = run_cli("batches", str(root), "--json")
    assert result.exit_code == 0
    row = result.json()["batches"][-1]
    assert row["batch"] == 9 and "offsets/9" in row["problem"] and row["planned"] is None


def test_kafka_offsets_per_partition_and_change(tmp_path: Path) -> None:
    root = copy_checkpoint(tmp_path)
    _set_source_offsets(
        root,
        {
            6: ['{"events":{"0":1000000,"1":5}}'],
            7: ['{"events":{"0":1001234,"1":5}}'],
            8: ['{"events":{"0":1001234,"1":17,"2":0}}'],
            9: ["-"],
        },
    )
    rows = batch_timeline(ckpt_cli.open(str(root))).batches
    first, second, third, fourth = (r.sources[0] for r in rows)
    assert first.kind == "kafka" and first.records is None  # no batch before it
    assert second.partitions is not None and second.records == 1234
    assert [(p.partition, p.offset, p.change) for p in second.partitions] == [
        (0, 1001234, 1234),
        (1, 5, 0),
    ]
    assert third.records is None  # partition 2 is new: its change is unknown
    assert third.partitions is not None and third.partitions[2].change is None
    assert fourth.kind == "none"

    text = run_cli("batches", str(root), "--since", "7", "--until", "7")
    assert "1,234 records" in text.stdout and "Source 0 (Kafka)" in text.stdout
    assert "1,001,234 (+1,234)" in text.stdout and "events[1]" in text.stdout


def test_real_rate_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark 4.3's rate source (LongOffset: seconds since the start kept in sources/0/0) and
    rate-micro-batch source ({"offset", "timestamp"}; no source log), stopped in batch 4."""
    rows = batch_timeline(ckpt_cli.open(str(RATE))).batches
    assert [r.state for r in rows] == ["committed"] * 4 + ["in-flight"]
    rate = [r.sources[0] for r in rows]
    assert [s.kind for s in rate] == ["rate"] * 5
    assert [s.offset for s in rate] == [0, 18, 21, 25, 29]
    assert [s.change for s in rate] == [None, 18, 3, 4, 4]
    start = (RATE / "sources" / "0" / "0").read_text().split("\n")[1]
    assert rate[0].started == iso_ms(int(start))
    micro = [r.sources[1] for r in rows]
    assert [s.kind for s in micro] == ["other"] * 5
    assert micro[-1].offset == {"offset": 15, "timestamp": 5000}
    assert rows[0].watermark is None and rows[-1].watermark is not None
    monkeypatch.setenv("COLUMNS", "200")  # no wrapping in the table
    text = run_cli("batches", str(RATE), "--last", "1").stdout
    assert "rate 29 s (+4)" in text and "in flight 4" in text


def test_rate_source_long_offsets(tmp_path: Path) -> None:
    # A LongOffset (a bare number) without the rate source's start file: a plain number.
    root = copy_checkpoint(tmp_path)
    _set_source_offsets(root, {6: ["40"], 7: ["41"], 8: ["43"], 9: ["43"]})
    data: Any = run_cli("batches", str(root), "--json").json()
    sources = [b["sources"][0] for b in data["batches"]]
    assert [s["kind"] for s in sources] == ["long"] * 4
    assert [s.get("change") for s in sources] == [None, 1, 2, 0]
    assert [s["offset"] for s in sources] == [40, 41, 43, 43]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--last", "2"], [8, 9]),
        (["--since", "7"], [7, 8, 9]),
        (["--until", "7"], [6, 7]),
        (["--since", "7", "--until", "8", "--last", "1"], [8]),
        (["--since", "100"], []),
    ],
)
def test_range_options(args: list[str], expected: list[int]) -> None:
    result = run_cli("batches", str(AGG), "--json", *args)
    assert result.exit_code == 0
    assert [b["batch"] for b in result.json()["batches"]] == expected


def test_api_and_bad_input(tmp_path: Path) -> None:
    report = ckpt_cli.open(str(AGG)).timeline(last=1)
    assert [r.batch for r in report.batches] == [9] and report.ok
    assert json.dumps(report.to_json())  # plain JSON types only

    bad = run_cli("batches", str(AGG), "--last", "0")
    assert bad.exit_code == 2
    missing = run_cli("batches", str(tmp_path / "nope"))
    assert missing.exit_code == 2 and len(missing.stderr.strip().splitlines()) <= 2


def test_inspect_shows_offsets_and_times_in_human_form() -> None:
    path = JOIN / "offsets" / "19"
    seq = _offsets(JOIN, 19)
    text = run_cli("inspect", str(path))
    assert text.exit_code == 0
    assert f"batch_timestamp  {iso_ms(seq.batch_timestamp_ms)} (" in text.stdout
    assert f"batch_watermark  {iso_ms(seq.batch_watermark_ms)} (" in text.stdout
    assert str(seq.batch_timestamp_ms) not in text.stdout  # no raw milliseconds
    assert 'source 1         {"logOffset":9}' in text.stdout
    data = run_cli("inspect", str(path), "--json").json()
    assert data["header"]["batch_timestamp"] == iso_ms(seq.batch_timestamp_ms)
    assert data["header"]["batch_timestamp_ms"] == seq.batch_timestamp_ms  # still there

    commit = run_cli("inspect", str(JOIN / "commits" / "19")).stdout
    assert f"next_batch_watermark  {iso_ms(seq.batch_watermark_ms)} (" in commit
