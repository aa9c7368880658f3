"""``replay/ordered.in_order`` under every size it is used at: any number of sources (state
partitions) 1-400, any number of workers 1-8 and queue depths, with slow sources, slow work,
and sources or work that fail. It gives exactly what one thread gives (the same batches in
the same order, and the same error where one thread meets it), and it always finishes.

A hang is caught by a watchdog, not waited out: the run is consumed in its own thread and a
run that has not finished within ``HANG_SECONDS`` (far above what any of these takes) fails
the test with every thread's stack, so a deadlock shows where the threads wait.
"""

from __future__ import annotations

import io
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import cast

import pytest

from ckpt_cli.progress import NULL_PROGRESS
from ckpt_cli.state.ordered import ahead, in_order, write_in_order

HANG_SECONDS = 60.0


class Boom(Exception):
    """The failure a source or a piece of work is told to raise."""


@dataclass(frozen=True)
class SourceSpec:
    index: int
    items: int
    slow_open: float = 0.0  # seconds before the source gives its first work (merging)
    slow_work: float = 0.0  # seconds each piece of work takes
    fail_open: bool = False  # the source raises when called
    fail_at: int | None = None  # the source raises after giving this many works
    fail_work_at: int | None = None  # this piece of work raises


@dataclass
class Observed:
    """What the threads did: how many sources were open at once, and in what order."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    open_now: int = 0
    most_open: int = 0
    opened: list[int] = field(default_factory=list)


def _source(spec: SourceSpec, seen: Observed) -> Callable[[], Iterator[Callable[[], str]]]:
    def work(j: int) -> str:
        if spec.slow_work:
            time.sleep(spec.slow_work)
        if spec.fail_work_at == j:
            raise Boom(f"work {spec.index}.{j}")
        return f"{spec.index}.{j}"

    def gen() -> Iterator[Callable[[], str]]:
        with seen.lock:
            seen.open_now += 1
            seen.most_open = max(seen.most_open, seen.open_now)
            seen.opened.append(spec.index)
        try:
            if spec.fail_open:
                raise Boom(f"source {spec.index}")
            if spec.slow_open:
                time.sleep(spec.slow_open)
            for j in range(spec.items):
                if spec.fail_at == j:
                    raise Boom(f"source {spec.index} at {j}")
                yield lambda j=j: work(j)  # type: ignore[misc]
        finally:
            with seen.lock:
                seen.open_now -= 1

    return gen


def _one_thread(specs: Sequence[SourceSpec]) -> tuple[list[str], str | None]:
    """What a single thread gives: the batches, then the error it stops at (if any)."""
    out: list[str] = []
    for spec in specs:
        if spec.fail_open:
            return out, f"source {spec.index}"
        for j in range(spec.items):
            if spec.fail_at == j:
                return out, f"source {spec.index} at {j}"
            if spec.fail_work_at == j:
                return out, f"work {spec.index}.{j}"
            out.append(f"{spec.index}.{j}")
    return out, None


def _consume(run: Callable[[], Iterator[str]]) -> tuple[list[str], str | None]:
    """Consumes ``run()`` in a thread under the watchdog."""
    got: list[str] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            for item in run():
                got.append(item)
        except BaseException as exc:
            error.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(HANG_SECONDS)
    if thread.is_alive():
        stacks = "\n".join(
            f"thread {ident}:\n" + "".join(traceback.format_stack(frame))
            for ident, frame in sys._current_frames().items()
        )
        pytest.fail(f"in_order did not finish in {HANG_SECONDS:.0f} s:\n{stacks}")
    if error and not isinstance(error[0], Boom):
        raise error[0]
    return got, (str(error[0]) if error else None)


def _check(specs: Sequence[SourceSpec], workers: int, depth: int) -> Observed:
    seen = Observed()
    sources = [_source(s, seen) for s in specs]
    got = _consume(lambda: in_order(sources, workers, depth))
    assert got == _one_thread(specs)
    if workers > 1:
        assert seen.most_open <= workers
        assert seen.opened == sorted(seen.opened)  # opened in order, never one skipped
    # Every source that was opened was closed again, on errors too.
    assert seen.open_now == 0
    return seen


# The deadlock Spark's default 200 shuffle partitions met: small partitions (a batch or
# two, fewer than the queue holds) end before the reader reaches them and keep their place
# until it does; a source opened out of turn took the place the reader's next source
# needed. Large partitions (more work than the queue holds) block on their full queue
# while holding a place. Both, at every count and number of workers.
@pytest.mark.parametrize("count", [1, 2, 3, 7, 9, 16, 64, 199, 200, 201, 400])
@pytest.mark.parametrize("workers", range(1, 9))
@pytest.mark.parametrize("items", [1, 6])
def test_every_source_count_and_worker_count_finishes_in_order(
    count: int, workers: int, items: int
) -> None:
    specs = [SourceSpec(i, items=items) for i in range(count)]
    _check(specs, workers, depth=2)


@pytest.mark.parametrize("seed", range(40))
def test_random_sizes_slow_and_failing_sources(seed: int) -> None:
    rng = random.Random(seed)
    count = rng.choice([1, 2, 5, 33, 200, rng.randint(1, 400)])
    workers = rng.randint(1, 8)
    depth = rng.randint(1, 5)
    specs = []
    for i in range(count):
        roll = rng.random()
        specs.append(
            SourceSpec(
                i,
                items=rng.choice([0, 1, 2, depth, depth + 3, 12]),
                # A few slow ones: a source still merging while later ones are ready, and
                # work that finishes after the work queued behind it.
                slow_open=0.01 if roll < 0.05 else 0.0,
                slow_work=0.002 if 0.05 <= roll < 0.1 else 0.0,
            )
        )
    # About half the runs fail somewhere: at a source's start, midway, or in a work.
    if seed % 2 and count:
        at = rng.randrange(count)
        how = rng.choice(["open", "midway", "work"])
        spec = specs[at]
        items = max(spec.items, 2)
        if how == "open":
            specs[at] = SourceSpec(at, items, fail_open=True)
        elif how == "midway":
            specs[at] = SourceSpec(at, items, fail_at=items // 2)
        else:
            specs[at] = SourceSpec(at, items, slow_work=0.002, fail_work_at=items - 1)
    _check(specs, workers, depth)


def test_a_slow_first_source_holds_back_nothing_but_its_own_place() -> None:
    # Source 0 merges slowly while the rest are quick: the others run ahead up to the
    # places there are, and the output is still in order.
    specs = [SourceSpec(0, 5, slow_open=0.3)] + [SourceSpec(i, 5) for i in range(1, 50)]
    seen = _check(specs, workers=4, depth=2)
    assert seen.most_open == 4


def test_a_failing_partition_ends_the_run_with_its_error() -> None:
    # The last of 200 sources fails: everything before it is given, then its error.
    specs = [SourceSpec(i, 3) for i in range(199)] + [SourceSpec(199, 3, fail_at=1)]
    got, error = _consume(lambda: in_order([_source(s, Observed()) for s in specs], 8, 2))
    assert error == "source 199 at 1"
    assert len(got) == 199 * 3 + 1


def test_a_reader_that_stops_early_stops_every_source() -> None:
    seen = Observed()
    sources = [_source(SourceSpec(i, 10), seen) for i in range(200)]
    run = cast("Generator[str, None, None]", in_order(sources, 8, 2))
    first = [next(run) for _ in range(25)]
    run.close()
    assert first == [f"{i}.{j}" for i in range(3) for j in range(10)][:25]
    # The reader hands work on up to 2 x 8 batches beyond what it gave: 41 batches read, so
    # at most 4 sources of 10 ended and gave their places to 4 more than the first 8.
    ended = (25 + 2 * 8) // 10
    assert seen.open_now == 0 and len(seen.opened) <= 8 + ended


@pytest.mark.parametrize("workers", [1, 2, 8])
def test_write_in_order_writes_every_partition_once(workers: int) -> None:
    def source(i: int) -> Iterator[Callable[[], tuple[bytes, int]]]:
        for j in range(5):
            yield lambda j=j: (f"{i}.{j}\n".encode(), 1)  # type: ignore[misc]

    out = io.StringIO()
    sources = [lambda i=i: source(i) for i in range(300)]
    box: list[int] = []

    def run() -> Iterator[str]:
        box.append(write_in_order(sources, out, workers, NULL_PROGRESS))
        return iter(())

    _consume(run)
    assert box == [1500]
    assert out.getvalue() == "".join(f"{i}.{j}\n" for i in range(300) for j in range(5))


# -- ahead: one source made in a thread of its own while the reader works ------------------


def _items(spec: SourceSpec, seen: Observed) -> Callable[[], Iterator[str]]:
    """``spec``'s source as plain items (its works done where it runs)."""
    make = _source(spec, seen)

    def items() -> Iterator[str]:
        gen = make()
        try:
            for work in gen:
                yield work()
        finally:
            gen.close()  # type: ignore[attr-defined]

    return items


@pytest.mark.parametrize("seed", range(30))
def test_ahead_gives_what_its_source_gives_at_any_depth_slow_or_failing(seed: int) -> None:
    rng = random.Random(seed)
    depth = rng.randint(1, 6)
    items = rng.choice([0, 1, depth, depth + 1, 40])
    how = rng.choice(["", "", "open", "midway", "work", "slow", "slow work"])
    spec = SourceSpec(
        0,
        items,
        slow_open=0.02 if how == "slow" else 0.0,
        slow_work=0.002 if how == "slow work" else 0.0,
        fail_open=how == "open",
        fail_at=items // 2 if how == "midway" and items else None,
        fail_work_at=items - 1 if how == "work" and items else None,
    )
    seen = Observed()
    got = _consume(lambda: ahead(_items(spec, seen), depth))
    assert got == _one_thread([spec])
    assert seen.open_now == 0  # closed, on errors too


@pytest.mark.parametrize("depth", [1, 2, 8])
def test_ahead_stops_its_source_when_the_reader_stops(depth: int) -> None:
    seen = Observed()
    run = cast("Generator[str, None, None]", ahead(_items(SourceSpec(0, 1000), seen), depth))
    first = [next(run) for _ in range(5)]
    run.close()
    assert first == [f"0.{j}" for j in range(5)]
    assert seen.open_now == 0
