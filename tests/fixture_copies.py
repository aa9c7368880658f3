"""Helpers for tests that copy a real fixture and change it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def age_everything(root: Path, seconds: float = 7200) -> None:
    """Fixture files carry their checkout time: make every file and directory (links not
    followed) look an idle query's, so the --min-age and active-query guards let them be."""
    when = time.time() - seconds
    for path in [root, *root.rglob("*")]:
        os.utime(path, (when, when), follow_symlinks=False)


def latest(root: Path) -> int:
    return max(int(p.name) for p in (root / "commits").iterdir() if p.name.isdigit())


def truncate_latest_delta(root: Path) -> None:
    """State of the last batch corrupted: its delta cut short."""
    delta = root / f"state/0/0/{latest(root) + 1}.delta"
    delta.write_bytes(delta.read_bytes()[:-10])
    (delta.parent / f".{delta.name}.crc").unlink(missing_ok=True)


def memory_objects(fs: Any, name: str) -> dict[str, bytes]:
    """Every object under ``memory://<name>`` and its bytes."""
    return {k: fs.cat_file(k) for k in fs.find(f"/{name}")}


@contextmanager
def in_memory_store(src: Path, name: str) -> Iterator[tuple[Any, dict[str, bytes]]]:
    """The checkpoint ``src`` copied to ``memory://<name>`` (an object store: no Hadoop .crc
    sidecars, as S3A/ABFS write none): the memory filesystem and its objects before; the
    copy and its quarantine removed after."""
    import fsspec

    fs = fsspec.filesystem("memory")
    for p in src.rglob("*"):
        if p.is_file() and not p.name.startswith("."):
            fs.pipe_file(f"/{name}/{p.relative_to(src)}", p.read_bytes())
    try:
        yield fs, memory_objects(fs, name)
    finally:
        for root in (f"/{name}", f"/{name}.ckpt-quarantine"):
            if fs.exists(root):
                fs.rm(root, recursive=True)
