"""Parquet replay with partitions decoded in threads (``replay/ordered``): the file one
thread writes, row for row; a limit cuts where it did; an error still names its file."""

from __future__ import annotations

import functools
import io
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.errors import FormatError
from ckpt_cli.replay import read_state
from ckpt_cli.replay.sinks import write_state_parquet
from ckpt_cli.state.ordered import in_order
from tests.conftest import CASES, CASES_DIR

pq = pytest.importorskip("pyarrow.parquet")

# Columnar stores of several partitions: HDFS deltas+snapshots, RocksDB zips and changelogs.
FIXTURES = [
    "spark4-hdfs-agg",
    "spark4-hdfs-agg-zstd",
    "spark4-rocksdb-changelog",
    "spark4-rocksdb-v2",
    "spark4-dedup",
    "spark35-rocksdb-changelog",
    "spark33-rocksdb-agg",
]


def _parquet(root: Path, workers: int, limit: int | None = None, **kw: object) -> bytes:
    out = io.BytesIO()
    write_state_parquet(read_state(str(root), **kw), out, limit, workers)  # type: ignore[arg-type]
    return out.getvalue()


@pytest.mark.skipif(not CASES, reason="no fixtures")
@pytest.mark.parametrize("name", FIXTURES)
def test_threads_write_the_file_of_one_thread(name: str) -> None:
    root = CASES_DIR / name / "checkpoint"
    one = _parquet(root, 1)
    table = pq.read_table(io.BytesIO(one))
    assert table.num_rows and len(set(table["partition_id"].to_pylist())) > 1
    assert pq.read_table(io.BytesIO(_parquet(root, 3))).equals(table)
    for limit in (0, 1, table.num_rows // 2 + 1):
        cut = pq.read_table(io.BytesIO(_parquet(root, 3, limit)))
        assert cut.equals(table.slice(0, limit))


def _synthetic(root: Path, partitions: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from synthetic import build

    build(root, partitions=partitions, versions=2, keys=50_000, snapshot_every=100, crc=False)


def test_many_batches_in_many_partitions_keep_their_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ckpt_cli.state import bulk

    root = tmp_path / "ckpt"
    _synthetic(root, 5)
    monkeypatch.setattr(bulk, "BATCH_ROWS", 1000)  # 10 batches a partition
    one = pq.read_table(io.BytesIO(_parquet(root, 1)))
    assert pq.read_table(io.BytesIO(_parquet(root, 2))).equals(one)
    assert one.num_rows == 50_000
    assert one["partition_id"].to_pylist() == sorted(one["partition_id"].to_pylist())


def test_an_error_in_a_thread_names_its_file(tmp_path: Path) -> None:
    from ckpt_cli.formats.compression import compress, decompressed_chunks

    root = tmp_path / "ckpt"
    _synthetic(root, 3)
    delta = root / "state/0/2/2.delta"
    with open(delta, "rb") as fh:
        data = b"".join(decompressed_chunks(str(delta), fh, codec="lz4"))
    delta.write_bytes(compress(data[:-9], "lz4"))  # a record cut short, no end marker
    errors = []
    for workers in (1, 2):
        with pytest.raises(FormatError) as caught:
            _parquet(root, workers)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and "2.delta" in errors[0]


def _identity(item: Any) -> Any:
    return item


def _as_work(source: Callable[[], Iterator[Any]]) -> Callable[[], Iterator[Callable[[], Any]]]:
    """``source`` giving work that makes its batches (its generator closed as it would be)."""

    def works() -> Iterator[Callable[[], Any]]:
        items = source()
        try:
            for item in items:
                yield functools.partial(_identity, item)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    return works


def _works(sources: Sequence[Any]) -> list[Any]:
    return [_as_work(source) for source in sources]


def test_in_order_gives_each_source_whole_in_turn() -> None:
    def source(tag: int, n: int) -> Iterator[tuple[int, int]]:
        for i in range(n):
            time.sleep(0.001 * (tag % 2))  # odd sources slower: order still by source
            yield tag, i

    sources = [lambda t=t: source(t, 7 + t) for t in range(5)]
    expected = [(t, i) for t in range(5) for i in range(7 + t)]
    assert list(in_order(_works(sources), 3, depth=2)) == expected
    assert list(in_order(_works(sources), 1)) == expected
    assert list(in_order([], 2)) == []


def test_in_order_raises_a_sources_error_and_stops_the_others() -> None:
    started, closed = threading.Event(), threading.Event()

    def endless() -> Iterator[int]:
        started.set()
        try:
            while True:
                yield 1
        finally:
            closed.set()

    def broken() -> Iterator[int]:
        yield 0
        assert started.wait(5)
        raise FormatError("state/0/1/2.delta", "truncated")

    got = []
    with pytest.raises(FormatError, match="2.delta"):
        for batch in in_order(_works([broken, endless]), 2, depth=2):
            got.append(batch)
    assert got == [0]
    assert closed.wait(5)  # the other source's thread stopped, its generator closed


def test_a_reader_stopping_early_stops_the_threads() -> None:
    before = threading.active_count()
    batches = in_order(_works([lambda: iter(range(10**9)) for _ in range(3)]), 2, depth=2)
    assert [next(batches) for _ in range(3)] == [0, 1, 2]
    batches.close()  # type: ignore[attr-defined]
    assert threading.active_count() == before


def test_a_source_that_fails_to_start_is_raised_not_waited_on() -> None:
    """A source whose call raises (not a generator's first step) reaches the reader as its
    error; the reader does not wait forever on its queue."""

    def broken() -> Any:
        raise ValueError("cannot start")

    def fine() -> Any:
        yield from range(3)

    got: list[int] = []
    with pytest.raises(ValueError, match="cannot start"):
        for item in in_order(_works([fine, broken, fine]), 2):
            got.append(item)
    assert got == [0, 1, 2]


def test_the_source_being_read_has_every_worker() -> None:
    """Its work is done by all the workers, not only by its own thread."""
    threads: set[int] = set()

    def slow(i: int) -> int:
        threads.add(threading.get_ident())
        time.sleep(0.005)
        return i

    def source() -> Iterator[Callable[[], int]]:
        for i in range(40):
            yield functools.partial(slow, i)

    assert list(in_order([source], 3)) == list(range(40))
    assert len(threads) >= 2
    threads.clear()
    assert list(in_order([source, source], 3)) == list(range(40)) * 2
    assert len(threads) >= 2
    threads.clear()
    assert list(in_order([source, source], 1)) == list(range(40)) * 2
    assert threads == {threading.get_ident()}  # one worker: the calling thread


def test_no_more_sources_open_than_workers() -> None:
    """A source is open from its call until its last work is done (its merged files live
    until then): never more than ``workers`` at once, however fast sources give work."""
    lock = threading.Lock()
    now, most = [0], [0]

    def work(last: bool, i: int) -> int:
        time.sleep(0.002)
        if last:
            with lock:
                now[0] -= 1
        return i

    def source(tag: int) -> Iterator[Callable[[], int]]:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        for i in range(12):
            yield functools.partial(work, i == 11, tag * 100 + i)

    sources = [functools.partial(source, tag) for tag in range(8)]
    got = list(in_order(sources, 2, depth=16))
    assert got == [tag * 100 + i for tag in range(8) for i in range(12)]
    assert most[0] <= 2


def test_an_error_in_work_is_raised_after_the_batches_before_it() -> None:
    def fails() -> int:
        raise FormatError("state/0/2/5.delta", "bad row")

    def first() -> Iterator[Callable[[], int]]:
        yield from (functools.partial(_identity, i) for i in range(5))

    def second() -> Iterator[Callable[[], int]]:
        yield functools.partial(_identity, 5)
        yield fails
        yield functools.partial(_identity, 7)

    got: list[int] = []
    with pytest.raises(FormatError, match="5.delta"):
        for item in in_order([first, second, first], 2):
            got.append(item)
    assert got == [0, 1, 2, 3, 4, 5]
