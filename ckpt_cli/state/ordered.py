"""Several sources of batches run side by side in threads, their batches given in order: all
of the first source's, then all of the second's, ... exactly as one thread would give them.

A source gives work: calls that make its batches. The source's own thread reads and merges
its files (up to ``workers`` sources open at a time, each running ahead by at most ``depth``
pieces of work); ``workers`` other threads do the work of the source being read. So that
source has every core while the sources after it merge their files. (With a thread per
source making its own batches, the next source's thread stopped after ``depth`` batches to
wait for the one before, and a core stood idle.) The columnar replay spends its time in
numpy and pyarrow, which release the GIL, so threads share the cores without a process (and
its own interpreter) each. An error in a source or its work is raised, as it is, where its
batch would have come; the sources still running are then stopped, as they are when the
reader stops early.

Why it cannot deadlock: sources are opened strictly in index order, each only when one of
the ``workers`` places is free, and each open source has a thread of its own (the pool has a
thread per place). So the open sources are always the next ones the reader needs: the one
it waits on is open (it makes progress) or is the next to open, and the places before it
belong to sources the reader has passed, whose remaining work the doers finish on their
own. (Before, every source's thread waited for a place at once, and a later source could
take a place an earlier one freed: with every place held by sources blocked on a full
queue, the source the reader waited for never started.)
"""

from __future__ import annotations

import collections
import functools
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any, TypeVar

from ckpt_cli.progress import ProgressSink

T = TypeVar("T")

# Pieces of work a source may give ahead of the reader.
DEPTH = 4

_ITEM, _END, _ERROR = range(3)


def in_order(
    sources: Sequence[Callable[[], Iterator[Callable[[], T]]]], workers: int, depth: int = DEPTH
) -> Iterator[T]:
    """What the work of ``sources`` makes, source after source: each source (called once, in
    a worker thread; up to ``workers`` at a time, opened in order) gives calls without
    arguments, and ``workers`` threads make the batches of the source being read."""
    if workers <= 1 or not sources:
        for source in sources:
            for work in source():
                yield work()
        return
    with ThreadPoolExecutor(max_workers=workers) as doers:
        yield from _ordered(sources, workers, depth, doers)


def ahead(source: Callable[[], Iterator[T]], depth: int = DEPTH) -> Iterator[T]:
    """What ``source`` gives, made in a thread of its own up to ``depth`` items ahead of the
    reader: the reader's own work overlaps it. An error in the source is raised where its
    item would have come; the source stops when the reader does."""
    stop = threading.Event()
    out: queue.Queue[tuple[int, Any]] = queue.Queue(depth)
    thread = threading.Thread(target=_feed, args=(source, out, stop), daemon=True)
    thread.start()
    try:
        while True:
            kind, item = out.get()
            if kind == _END:
                return
            if kind == _ERROR:
                raise item
            yield item
    finally:
        stop.set()
        thread.join()


def _ordered(
    sources: Sequence[Callable[[], Iterator[Any]]],
    workers: int,
    depth: int,
    doers: ThreadPoolExecutor,
) -> Iterator[Any]:
    stop = threading.Event()
    queues: list[queue.Queue[tuple[int, Any]]] = [queue.Queue(depth) for _ in sources]

    def run(index: int) -> None:
        _feed(sources[index], queues[index], stop)

    # A thread per place: an opened source never waits for a thread.
    pool = ThreadPoolExecutor(max_workers=min(workers, len(sources)))
    opener = _Opener(len(sources), workers, lambda index: pool.submit(run, index))
    pending: collections.deque[Future[Any]] = collections.deque()
    try:
        opener.open_more()
        for out in queues:
            work = _Work(opener.close_one)  # this source's, given to the doers
            while True:
                kind, batch = out.get()
                if kind == _ITEM:
                    pending.append(work.add(doers.submit(batch)))
                    while len(pending) > 2 * workers:
                        yield pending.popleft().result()
                    continue
                if kind == _ERROR:
                    while pending:  # the batches before it first
                        yield pending.popleft().result()
                    raise batch
                work.end()
                break
        while pending:
            yield pending.popleft().result()
    finally:
        stop.set()
        opener.shut()
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


class _Opener:
    """Opens sources in index order, at most ``places`` at once: ``open_more`` at the start
    and ``close_one`` each time an open source is done (from any thread)."""

    def __init__(self, count: int, places: int, start: Callable[[int], Any]) -> None:
        self._lock = threading.Lock()
        self._count = count
        self._free = places
        self._next = 0
        self._start = start
        self._shut = False

    def open_more(self) -> None:
        # Under the lock: sources start in order, and never after ``shut`` (the pool is
        # being shut down then).
        with self._lock:
            while self._free > 0 and self._next < self._count and not self._shut:
                self._start(self._next)
                self._next += 1
                self._free -= 1

    def close_one(self) -> None:
        with self._lock:
            self._free += 1
        self.open_more()

    def shut(self) -> None:
        with self._lock:
            self._shut = True


class _Work:
    """A source's work not yet done. The source closes (its place among the open ones is
    released) once it has ended and all its work is done: nothing holds its files then."""

    def __init__(self, closed: Callable[[], None]) -> None:
        self._closed = closed
        self._lock = threading.Lock()
        self._left = 0
        self._ended = False

    def add(self, future: Future[Any]) -> Future[Any]:
        with self._lock:
            self._left += 1
        future.add_done_callback(self._done)  # counted, not kept: results go with the reader
        return future

    def end(self) -> None:
        with self._lock:
            self._ended = True
            closed = self._left == 0
        if closed:
            self._closed()

    def _done(self, _: Future[Any]) -> None:
        with self._lock:
            self._left -= 1
            closed = self._ended and self._left == 0
        if closed:
            self._closed()


def _feed(
    source: Callable[[], Iterator[Any]], out: queue.Queue[tuple[int, Any]], stop: threading.Event
) -> None:
    """What ``source`` gives onto ``out``, then its end or its error (a source that fails to
    start is an error too), until the reader stops; the source is closed either way."""
    items = None
    try:
        items = source()
        for item in items:
            if not _put(out, (_ITEM, item), stop):
                return
        _put(out, (_END, None), stop)
    except BaseException as exc:  # raised again in the reader's thread
        _put(out, (_ERROR, exc), stop)
    finally:
        close = getattr(items, "close", None)
        if close is not None:
            close()


def _put(out: queue.Queue[tuple[int, Any]], item: tuple[int, Any], stop: threading.Event) -> bool:
    """``item`` onto ``out`` once there is room; False when the reader has stopped."""
    while not stop.is_set():
        try:
            out.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def write_in_order(
    sources: Sequence[Callable[[], Iterator[Callable[[], tuple[bytes, int]]]]],
    out: IO[str],
    workers: int,
    progress: ProgressSink,
) -> int:
    """The ``(text, rows)`` chunks the work of ``sources`` (partitions) makes, written onto
    ``out`` in source order as they come (``in_order``), ``progress`` advanced at each
    source's end; returns the rows written."""

    def ended(
        source: Callable[[], Iterator[Callable[[], tuple[bytes, int]]]],
    ) -> Iterator[Callable[[], tuple[bytes, int] | None]]:
        yield from source()
        yield _nothing  # the source's end

    write = utf8_writer(out)
    total = 0
    chunks = in_order([functools.partial(ended, source) for source in sources], workers)
    for chunk in chunks:
        if chunk is None:
            progress.advance()
            continue
        write(chunk[0])
        total += chunk[1]
    return total


def _nothing() -> None:
    return None


def utf8_writer(out: IO[str]) -> Callable[[bytes], Any]:
    """Writes UTF-8 bytes onto ``out``: onto the binary stream under it when there is one
    (no decoding and encoding again)."""
    binary = getattr(out, "buffer", None)
    if binary is None:
        return lambda data: out.write(data.decode("utf-8"))
    out.flush()
    return binary.write  # type: ignore[no-any-return]
