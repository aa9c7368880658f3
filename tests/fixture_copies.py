"""Helpers for tests that copy a real fixture and change it."""

from __future__ import annotations

import os
import re
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


def latest_offsets(root: Path) -> Path:
    return max(
        (p for p in (root / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
    )


def touch_everything(root: Path, when: float | None = None) -> None:
    """Every file and directory modified at ``when`` (default now), as ``cp -r``, a restore
    or a download leaves a checkpoint: its batches keep their old batchTimestampMs."""
    when = time.time() if when is None else when
    for path in [root, *root.rglob("*")]:
        os.utime(path, (when, when), follow_symlinks=False)


def plan_latest_batch(root: Path, seconds_ago: float = 0.0) -> int:
    """As a running query leaves it: the newest offsets entry planned ``seconds_ago``
    (its batchTimestampMs rewritten, its Hadoop .crc with it) and written then. Returns the
    batchTimestampMs written."""
    from ckpt_cli.formats.checksums import hadoop_crc_bytes

    entry = latest_offsets(root)
    stamp = round((time.time() - seconds_ago) * 1000)
    data, n = re.subn(
        rb'"batchTimestampMs":\d+', b'"batchTimestampMs":%d' % stamp, entry.read_bytes()
    )
    assert n == 1, entry
    entry.write_bytes(data)
    crc = entry.parent / f".{entry.name}.crc"
    if crc.exists():
        crc.write_bytes(hadoop_crc_bytes(data))
    os.utime(entry, (stamp / 1000, stamp / 1000))
    return stamp


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


def restart_zip(root: Path, partition: int = 0) -> Path:
    """The zip a restart of a RocksDB checkpoint (format v1, a zip per version) loads in
    ``partition``: that of the latest committed batch + 1."""
    zip_path = root / "state" / "0" / str(partition) / f"{latest(root) + 1}.zip"
    assert zip_path.exists(), zip_path
    return zip_path


def remove_restart_sst(root: Path, partition: int = 0) -> Path:
    """Delete an SST the restart zip of ``partition`` names (and its checksum); returns it."""
    from ckpt_cli.formats.rocksdb_zip import read_zip

    zip_path = restart_zip(root, partition)
    meta = read_zip(str(zip_path), zip_path.read_bytes()).metadata
    assert meta.sst_files, f"{zip_path} names no SST"
    sst = zip_path.parent / "SSTs" / meta.sst_files[0].dfs_file_name
    sst.unlink()
    for crc in (sst.parent / f".{sst.name}.crc", sst.parent / f"{sst.name}.crc"):
        crc.unlink(missing_ok=True)
    return sst


def truncate_restart_zip(root: Path, partition: int = 0) -> Path:
    """Cut the restart zip of ``partition`` in half (an interrupted copy); returns it."""
    zip_path = restart_zip(root, partition)
    data = zip_path.read_bytes()
    zip_path.write_bytes(data[: len(data) // 2])
    return zip_path
