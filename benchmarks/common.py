"""What every benchmark measures, and how: one harness so the figures compare.

* :func:`measure` runs a command in its own process tree, its output into a file (never
  /dev/null: every side writes what it produces), and returns wall time, CPU time of the
  whole tree and the peak of the tree's summed RSS.
* :func:`measure_call` does the same for a Python call, in a forked child (imports already
  paid, the parent's memory not counted as work done).
* :func:`alternate` runs cases A B A B ... ``repeat`` times (ckpt byte-compiled first, as
  an installed ckpt is), each after an untimed warm-up
  (:func:`warm`: one read of the input, so every side finds the page cache the same), and
  :func:`table` renders min and median of each figure as a Markdown table.

Memory is RSS summed over the live process tree, sampled with psutil every ~20 ms: PSS would
split the pages a worker shares with its parent and so hide the workers. CPU is the larger of
``wait4``'s rusage of the root (its own time and that of every descendant it reaped) and the
sum of the last sampled times of every process seen in the tree (descendants never reaped,
e.g. a JVM's daemon workers).
"""

from __future__ import annotations

import argparse
import functools
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import psutil

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[1]
SAMPLE_SECONDS = 0.02


@dataclass(frozen=True)
class Measurement:
    """One run: seconds of wall time, CPU seconds of the process tree, peak tree RSS bytes."""

    wall: float
    cpu: float
    peak_rss: int
    extra: Mapping[str, float] = field(default_factory=dict)


class TreeSampler:
    """Samples the process tree rooted at ``pid`` in a thread until :meth:`stop`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_rss = 0
        self.cpu_seen: dict[tuple[int, float], float] = {}  # (pid, start time) -> user+sys
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self.sample()
            if self._done.wait(SAMPLE_SECONDS):
                return

    def sample(self) -> None:
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return  # the root is gone (or a zombie); its last figures were kept
        rss = 0
        for proc in procs:
            try:
                with proc.oneshot():
                    rss += proc.memory_info().rss
                    times = proc.cpu_times()
                    self.cpu_seen[(proc.pid, proc.create_time())] = times.user + times.system
            except psutil.Error:
                continue  # exited between the listing and the read
        self.peak_rss = max(self.peak_rss, rss)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    @property
    def cpu(self) -> float:
        return sum(self.cpu_seen.values())


def _wait(pid: int, sampler: TreeSampler) -> tuple[int, float]:
    """Reap ``pid``: exit code and CPU of it and its reaped descendants (wait4's rusage)."""
    _, status, usage = os.wait4(pid, 0)
    sampler.stop()
    rusage_cpu = usage.ru_utime + usage.ru_stime
    return os.waitstatus_to_exitcode(status), max(rusage_cpu, sampler.cpu)


def measure(
    cmd: Sequence[str],
    *,
    output: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Measurement:
    """Run ``cmd`` with its stdout written to ``output``; raise SystemExit when it fails."""
    with open(output, "wb") as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(cmd), stdout=out, stderr=err, env=dict(env) if env else None, cwd=cwd
        )
        sampler = TreeSampler(proc.pid)
        code, cpu = _wait(proc.pid, sampler)
        wall = time.perf_counter() - start
        proc.returncode = code  # reaped above: Popen must not wait again
        if code != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-2000:]
            raise SystemExit(f"{cmd[0]} exited {code}: {tail}")
    return Measurement(wall, cpu, sampler.peak_rss)


def ckpt(*args: str, output: Path) -> Measurement:
    """A fresh ``python -m ckpt_cli ARGS`` process of this checkout, measured, its stdout
    written to ``output``."""
    return measure([sys.executable, "-m", "ckpt_cli", *args], output=output, cwd=REPO)


def measure_call(fn: Callable[[], T]) -> tuple[Measurement, T]:
    """Run ``fn()`` in a forked child, measured like :func:`measure`; returns its result
    (which must pickle). The child starts with this process's imports already done."""
    read_end, write_end = os.pipe()
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: run, send the result (or the error) back, never return
        os.close(read_end)
        code = 0
        try:
            payload = pickle.dumps((True, fn()))
        except BaseException as exc:  # reported by the parent, with its type and message
            payload, code = pickle.dumps((False, f"{type(exc).__name__}: {exc}")), 1
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(payload)
        os._exit(code)
    os.close(write_end)
    sampler = TreeSampler(pid)
    with os.fdopen(read_end, "rb") as pipe:
        payload = pipe.read()  # read before reaping: a large result must not block the child
    _, cpu = _wait(pid, sampler)
    wall = time.perf_counter() - start
    if not payload:
        raise SystemExit("benchmark call failed: the child died without a result")
    ok, value = pickle.loads(payload)
    if not ok:
        raise SystemExit(f"benchmark call failed: {value}")
    result: T = value  # pickle.loads is untyped: what fn() returned
    return Measurement(wall, cpu, sampler.peak_rss), result


def fresh_copy(src: Path, dest: Path) -> Path:
    """A fresh copy of checkpoint ``src`` at ``dest`` for a run that changes it (the copy and
    quarantine of the last run removed), read once (:func:`warm`) so that every run finds the
    page cache alike."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.rmtree(f"{dest}.ckpt-quarantine", ignore_errors=True)
    shutil.copytree(src, dest)
    warm(dest)
    return dest


def warm(*paths: Path) -> int:
    """Read every file under ``paths`` once (untimed), so each side starts from the same page
    cache; returns the bytes read."""
    total = 0
    for path in paths:
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            with open(file, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    total += len(chunk)
    return total


@dataclass(frozen=True)
class Case:
    """One side of a comparison: ``run`` is timed, ``prepare`` (e.g. :func:`warm`) is not."""

    name: str
    run: Callable[[], Measurement]
    prepare: Callable[[], object] | None = None


@functools.cache  # once per script run: the modules do not change while it measures
def byte_compiled() -> None:
    """ckpt's modules compiled to bytecode, as ``pip install`` leaves them: a checkout run
    under ``PYTHONDONTWRITEBYTECODE`` would otherwise compile every module it imports from
    source on every run (~0.1 s), which an installed ckpt never does."""
    import compileall

    compileall.compile_dir(Path(__file__).resolve().parents[1] / "ckpt_cli", quiet=1)


def alternate(cases: Sequence[Case], repeat: int) -> dict[str, list[Measurement]]:
    """Run the cases in turn, A B A B ..., ``repeat`` rounds; each case's measurements
    (ckpt byte-compiled first)."""
    byte_compiled()
    runs: dict[str, list[Measurement]] = {case.name: [] for case in cases}
    for _ in range(repeat):
        for case in cases:
            if case.prepare is not None:
                case.prepare()
            runs[case.name].append(case.run())
    return runs


def figures(values: Iterable[float]) -> tuple[float, float]:
    """Min and median."""
    data = list(values)
    return min(data), statistics.median(data)


def row(name: str, runs: Sequence[Measurement], **extra: str) -> dict[str, str]:
    """A table row: min / median of wall and CPU, median peak tree RSS, then ``extra``."""
    wall = figures(m.wall for m in runs)
    cpu = figures(m.cpu for m in runs)
    rss = statistics.median(m.peak_rss for m in runs)
    return {
        "case": name,
        "runs": str(len(runs)),
        "wall min / median (s)": f"{wall[0]:.2f} / {wall[1]:.2f}",
        "CPU min / median (s)": f"{cpu[0]:.2f} / {cpu[1]:.2f}",
        "peak tree RSS (MB)": f"{rss / 1e6:.0f}",
        **extra,
    }


def against_state(runs: Sequence[Measurement], state: int) -> dict[str, str]:
    """The extra column of a run that holds a state: its median peak tree RSS (as in
    :func:`row`) over the state's bytes."""
    rss = statistics.median(m.peak_rss for m in runs)
    return {"peak RSS / state": f"{rss / state:.2f}x"}


def table(rows: Sequence[Mapping[str, str]]) -> str:
    """A Markdown table; the columns are the union of the rows' keys, in first-seen order."""
    columns: list[str] = []
    for r in rows:
        columns += [c for c in r if c not in columns]
    lines = [
        "| " + " | ".join(columns) + " |",
        "|" + "|".join("---" for _ in columns) + "|",
    ]
    lines += ["| " + " | ".join(r.get(c, "") for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def add_options(parser: argparse.ArgumentParser) -> None:
    """The options every benchmark takes: ``--repeat``, ``--quick``, ``--markdown``."""
    parser.add_argument("--repeat", type=int, default=3, help="rounds of A B A B (at least 3)")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    parser.add_argument("--markdown", type=Path, help="also write the section to this file")


def report(
    args: argparse.Namespace, title: str, notes: str, rows: Sequence[Mapping[str, str]]
) -> str:
    """Print (and with ``--markdown`` write) a section: a heading, notes, the table."""
    section = f"### {title}\n\n{notes.strip()}\n\n{table(rows)}\n"
    print(section)
    if args.markdown is not None:
        args.markdown.write_text(section)
    return section


def data_dir(*parts: str) -> Path:
    """``benchmarks/.data/<parts>`` (built data, reused across runs; not committed)."""
    path = Path(__file__).resolve().parent.joinpath(".data", *parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def machine() -> str:
    """One line about where the figures come from."""
    load = os.getloadavg()[0]
    return (
        f"{os.cpu_count()} cores, load average {load:.1f} at the start, "
        f"{psutil.virtual_memory().total / 1e9:.0f} GB RAM"
    )
