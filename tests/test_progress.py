"""Progress where long work happens: the library's calls to its sink (what the CLI draws on
a terminal), not the drawing or its timing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ckpt_cli
from ckpt_cli.engine import LocalEngine
from ckpt_cli.replay.datasets import write_dataset
from ckpt_cli.validate import validate
from tests.conftest import CASES_DIR

AGG = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"
ROCKSDB = CASES_DIR / "spark4-rocksdb-changelog" / "checkpoint"


class Recorder:
    """A ProgressSink that records its calls."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def start(self, description: str, total: int | None = None) -> None:
        self.events.append(("start", (description, total)))

    def advance(self, n: int = 1) -> None:
        self.events.append(("advance", n))

    def close(self) -> None:
        self.events.append(("close", None))

    def advanced(self) -> int:
        return sum(n for event, n in self.events if event == "advance")


def test_engine_advances_as_each_unit_is_done_not_at_the_end() -> None:
    sink = Recorder()
    seen: list[int] = []

    def work(unit: int) -> int:
        seen.append(sink.advanced())  # the units done before this one
        return unit * 2

    assert LocalEngine(workers=1).map(work, [1, 2, 3, 4], progress=sink) == [2, 4, 6, 8]
    assert seen == [0, 1, 2, 3] and sink.advanced() == 4


def test_engine_with_threads_advances_once_per_unit() -> None:
    sink = Recorder()
    units = list(range(20))
    assert LocalEngine(workers=4).map(str, units, progress=sink) == [str(u) for u in units]
    assert sink.events == [("advance", 1)] * 20


def test_replay_to_a_dataset_counts_partitions(tmp_path: Path) -> None:
    sink = Recorder()
    rows = ckpt_cli.open(str(AGG)).replay()
    counts = write_dataset(
        rows, str(tmp_path / "out"), "jsonl", engine=LocalEngine(workers=1), progress=sink
    )
    total = len(counts)
    assert total == len(list((tmp_path / "out").iterdir())) > 1
    assert sink.events[0] == ("start", ("Replaying partitions", total))
    assert sink.events[1:] == [("advance", 1)] * total + [("close", None)]


def test_deep_validate_moves_from_the_start_then_counts_files() -> None:
    sink = Recorder()
    report = validate(ckpt_cli.open(str(ROCKSDB)), deep=True, progress=sink)
    checked = report.stats["files_checked"]
    assert checked > 0
    # Before any file is read: the logs, sources and the plan of the versions.
    assert sink.events[0] == ("start", ("Checking logs, sources and state versions", None))
    assert sink.events[1] == ("start", ("Reading state files", checked))
    assert sink.events[2 : 2 + checked] == [("advance", 1)] * checked
    assert sink.events[-1] == ("close", None)
    assert sink.advanced() == checked
