"""Several sources of batches run side by side in threads, their batches given in order: all
of the first source's, then all of the second's, ... exactly as one thread would give them.

The columnar replay spends its time in numpy and pyarrow, which release the GIL, so threads
share the cores without a process (and its own interpreter) each. Each source runs ahead by
at most ``depth`` batches (a bounded queue), so memory stays a few batches per thread. An
error in a source is raised, as it is, where its batch would have come; the sources still
running are then stopped, as they are when the reader stops early.
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any, TypeVar

from ckpt_cli.progress import ProgressSink

T = TypeVar("T")

# Batches a source may run ahead of the reader.
DEPTH = 4

_ITEM, _END, _ERROR = range(3)


def in_order(
    sources: Sequence[Callable[[], Iterator[T]]], workers: int, depth: int = DEPTH
) -> Iterator[T]:
    """The batches of ``sources`` (each called once, in a worker thread), source after
    source; up to ``workers`` sources at a time."""
    if workers <= 1 or len(sources) <= 1:
        for source in sources:
            yield from source()
        return
    stop = threading.Event()
    queues: list[queue.Queue[tuple[int, Any]]] = [queue.Queue(depth) for _ in sources]

    def run(index: int) -> None:
        out = queues[index]
        if stop.is_set():
            return
        batches = None
        try:
            batches = sources[index]()  # a source that fails to start is an error too
            for batch in batches:
                if not _put(out, (_ITEM, batch), stop):
                    return
            _put(out, (_END, None), stop)
        except BaseException as exc:  # raised again in the reader's thread
            _put(out, (_ERROR, exc), stop)
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()

    # Threads take sources first come first served: when the reader waits on source k,
    # every source before it has ended, so source k has a thread.
    pool = ThreadPoolExecutor(max_workers=min(workers, len(sources)))
    try:
        for index in range(len(sources)):
            pool.submit(run, index)
        for out in queues:
            while True:
                kind, batch = out.get()
                if kind == _END:
                    break
                if kind == _ERROR:
                    raise batch
                yield batch
    finally:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)


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
    sources: Sequence[Callable[[], Iterator[tuple[bytes, int]]]],
    out: IO[str],
    workers: int,
    progress: ProgressSink,
) -> int:
    """The ``(text, rows)`` chunks of ``sources`` (partitions, each in a worker thread)
    written onto ``out`` in source order as they come, ``progress`` advanced at each
    source's end; returns the rows written."""

    def ended(source: Callable[[], Iterator[tuple[bytes, int]]]) -> Iterator[Any]:
        yield from source()
        yield None  # the source's end

    write = utf8_writer(out)
    total = 0
    for chunk in in_order([functools.partial(ended, source) for source in sources], workers):
        if chunk is None:
            progress.advance()
            continue
        write(chunk[0])
        total += chunk[1]
    return total


def utf8_writer(out: IO[str]) -> Callable[[bytes], Any]:
    """Writes UTF-8 bytes onto ``out``: onto the binary stream under it when there is one
    (no decoding and encoding again)."""
    binary = getattr(out, "buffer", None)
    if binary is None:
        return lambda data: out.write(data.decode("utf-8"))
    out.flush()
    return binary.write  # type: ignore[no-any-return]
