"""Where per-partition and per-checkpoint work runs: this machine, or a Spark cluster.

The driver (this process) lists the checkpoint once and plans units of work; an engine maps a
top-level function over them and returns the results in order:

* ``LocalEngine``: a thread pool for I/O-bound units (object stores), a process pool for
  CPU-bound ones on local files, or inline for a few units;
* ``SparkEngine``: ``sparkContext.parallelize(units).map(fn).collect()`` on an existing or new
  SparkSession. Executors import ckpt_cli (it must be installed where they run, e.g. with
  ``--py-files`` or the cluster's Python environment) and read files through fsspec with the
  storage options the driver used; only small results travel back.

Functions and units must be picklable (module-level functions, plain data).
"""

from __future__ import annotations

import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from ckpt_cli.errors import CkptError
from ckpt_cli.install import missing_extra
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink

T = TypeVar("T")
R = TypeVar("R")

ENGINES = ("local", "spark")


@dataclass(frozen=True)
class MapOptions:
    """How ``Engine.map`` runs its units (its keyword arguments)."""

    cpu_bound: bool
    initializer: Callable[..., None] | None
    initargs: tuple[Any, ...]
    progress: ProgressSink

    def initialize(self) -> None:
        """Run the initializer here (where the units run in this process)."""
        if self.initializer is not None:
            self.initializer(*self.initargs)


class Engine(ABC):
    """What every engine offers (``map``); an engine implements ``_map``."""

    name: str

    def map(
        self,
        fn: Callable[[T], R],
        units: Sequence[T],
        *,
        cpu_bound: bool = False,
        initializer: Callable[..., None] | None = None,
        initargs: tuple[Any, ...] = (),
        progress: ProgressSink = NULL_PROGRESS,
    ) -> list[R]:
        """``fn`` of each unit, in order; ``progress`` advances by one per unit done (the
        caller starts and closes it)."""
        return self._map(fn, units, MapOptions(cpu_bound, initializer, initargs, progress))

    def tasks(
        self,
        label: str,
        fn: Callable[[T], R],
        units: Sequence[T],
        setup: Callable[[], None],
        progress: ProgressSink = NULL_PROGRESS,
    ) -> list[R]:
        """CPU-bound tasks over a checkpoint's pieces (a distributed command's rounds), each
        process set up once by ``setup`` (picklable: a ``functools.partial`` of a module-level
        function), with ``progress`` started as ``label`` and closed after."""
        progress.start(label, total=len(units))
        try:
            return self.map(fn, units, cpu_bound=True, initializer=setup, progress=progress)
        finally:
            progress.close()

    @abstractmethod
    def _map(self, fn: Callable[[T], R], units: Sequence[T], options: MapOptions) -> list[R]: ...


class LocalEngine(Engine):
    """Threads or processes on this machine."""

    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers

    def _map(self, fn: Callable[[T], R], units: Sequence[T], options: MapOptions) -> list[R]:
        cores = os.cpu_count() or 1
        workers = self.workers or (cores if options.cpu_bound else min(32, cores * 4))
        if workers <= 1 or len(units) < 2:
            options.initialize()
            return _advancing(map(fn, units), options.progress)
        pool: Executor
        if options.cpu_bound:
            # Here, not at the top: multiprocessing costs every command 15-25 ms to import.
            from concurrent.futures import ProcessPoolExecutor

            pool = ProcessPoolExecutor(
                max_workers=min(workers, len(units)),
                initializer=options.initializer,
                initargs=options.initargs,
            )
            chunk = max(1, len(units) // (workers * 8))
            with pool:
                return _advancing(pool.map(fn, units, chunksize=chunk), options.progress)
        options.initialize()
        with ThreadPoolExecutor(max_workers=min(workers, len(units))) as threads:
            return _advancing(threads.map(fn, units), options.progress)


def _advancing(results: Iterator[R], progress: ProgressSink) -> list[R]:
    """The results, in order, advancing ``progress`` as each arrives (not all at the end)."""
    out = []
    for result in results:
        out.append(result)
        progress.advance()
    return out


class _TaskFailed:
    """A Spark task's CkptError, returned as its result: raised in the task, it would reach
    the driver as a PythonException wrapping the worker's traceback text, not the error."""

    def __init__(self, position: int, error: CkptError) -> None:
        self.position = position
        self.error = error


def _run_partition(
    args: tuple[Callable[..., Any], Callable[..., None] | None, tuple[Any, ...], list[Any]],
) -> list[Any] | _TaskFailed:
    fn, initializer, initargs, units = args
    out: list[Any] = []
    try:
        if initializer is not None:
            initializer(*initargs)
        for unit in units:
            out.append(fn(unit))
    except CkptError as exc:
        return _TaskFailed(len(out), exc)  # len(out): the failing unit's position
    return out


class SparkEngine(Engine):
    """Units as Spark tasks; results collected to the driver in order."""

    name = "spark"

    def __init__(self, session: Any, slices: int | None = None) -> None:
        self.session = session
        self.slices = slices

    @classmethod
    def start(cls, master: str | None = None) -> SparkEngine:
        """The active SparkSession, else one for ``master`` (or ``SPARK_REMOTE``)."""
        try:
            from pyspark.sql import SparkSession
        except ImportError as exc:
            raise missing_extra("engine=spark", "spark", exc) from exc
        session = SparkSession.getActiveSession()
        if session is None:
            # Local executors run this interpreter, where ckpt_cli is installed.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            builder = SparkSession.builder.appName("ckpt")
            if master:
                builder = builder.master(master)
            elif not os.environ.get("SPARK_REMOTE") and not os.environ.get("MASTER"):
                builder = builder.master("local[*]")
            try:
                session = builder.getOrCreate()
            except Exception as exc:  # py4j/JVM start-up errors are plain exceptions
                raise CkptError(f"cannot start Spark: {str(exc).splitlines()[0]}") from exc
        return cls(session)

    def _map(self, fn: Callable[[T], R], units: Sequence[T], options: MapOptions) -> list[R]:
        if not units:
            return []
        sc = self.session.sparkContext
        slices = self.slices or max(1, min(len(units), sc.defaultParallelism * 4))
        # One task per slice; each runs the initializer once, then its units in order.
        batches = [list(units[i::slices]) for i in range(slices)]
        work = [(fn, options.initializer, options.initargs, b) for b in batches]
        results = sc.parallelize(work, numSlices=slices).map(_run_partition).collect()
        options.progress.advance(len(units))  # Spark's own UI shows the tasks as they run
        failed = [
            (r.position * slices + i, r.error)
            for i, r in enumerate(results)
            if isinstance(r, _TaskFailed)
        ]
        if failed:
            raise min(failed, key=lambda f: f[0])[1]  # the first failing unit, as locally
        # Undo the round-robin split: unit j went to slice j % slices, position j // slices.
        out: list[Any] = [None] * len(units)
        for slice_index, chunk in enumerate(results):
            assert not isinstance(chunk, _TaskFailed)
            for pos, value in enumerate(chunk):
                out[pos * slices + slice_index] = value
        return out


def make_engine(name: str, *, workers: int | None = None, master: str | None = None) -> Engine:
    if name == "local":
        return LocalEngine(workers)
    if name == "spark":
        return SparkEngine.start(master)
    raise CkptError(f"engine={name}: expected one of {', '.join(ENGINES)}")
