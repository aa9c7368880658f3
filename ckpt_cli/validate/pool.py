"""Running the queued file checks in a pool, and what their results say together."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable

from ckpt_cli.core.loadable import shared_file_problems
from ckpt_cli.engine import Engine, LocalEngine
from ckpt_cli.formats import rocksdb_zip
from ckpt_cli.progress import ProgressSink
from ckpt_cli.validate.context import ValidationRun
from ckpt_cli.validate.files import FileResult, FileTask, check_file, check_in_worker, init_worker

# Bytes to decode from which the checks go to worker processes (local disk).
PROCESS_BYTES = 16 << 20


def run_file_checks(run: ValidationRun, engine: Engine, progress: ProgressSink) -> tuple[int, int]:
    """Decode every queued file; returns the reads and bytes the worker processes made."""
    tasks = list(run.tasks.values())
    if not tasks:
        return 0, 0
    progress.start("Reading state files", total=len(tasks))
    reads = nbytes = 0
    try:
        for result in _map(run, engine, tasks, progress):
            reads += result.reads
            nbytes += result.bytes_read
            for code, message, paths in result.findings:
                run.add(code, message, paths)
            if result.zip_metadata is not None:
                run.zip_metadata[result.path] = result.zip_metadata
                _check_zip_files(run, result.path, result.zip_metadata)
    finally:
        progress.close()
    return reads, nbytes


def _map(
    run: ValidationRun, engine: Engine, tasks: list[FileTask], progress: ProgressSink
) -> Iterable[FileResult]:
    storage = run.ckpt.storage
    cores = os.cpu_count() or 1
    # Decoding local files is CPU work under the GIL: processes keep every core busy, once
    # there is enough of it to pay for starting them (a restart's 800 small files take
    # 0.1 s in threads; a process pool costs about that to start, and its RSS besides).
    # Object stores are latency-bound, where threads overlap the requests.
    cpu_bound = (
        storage.is_local
        and len(tasks) >= 64
        and cores > 1
        and sum(t.size for t in tasks) > PROCESS_BYTES
    )
    if isinstance(engine, LocalEngine) and not cpu_bound:
        return engine.map(functools.partial(check_file, storage), tasks, progress=progress)
    return engine.map(
        check_in_worker,
        tasks,
        cpu_bound=True,
        initializer=init_worker,
        initargs=(storage,),
        progress=progress,
    )


def _check_zip_files(
    run: ValidationRun, zip_path: str, meta: rocksdb_zip.RocksDBCheckpointMetadata
) -> None:
    """Every SST and RocksDB log a zip names is present, with the size it records."""
    for code, message, paths in shared_file_problems(run.ckpt.listing, zip_path, meta):
        run.add(code, message, paths)
