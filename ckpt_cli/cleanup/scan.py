"""``orphans --recursive``: every checkpoint under a prefix, from one listing, each planned on
an engine (this machine or Spark)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ckpt_cli.cleanup.plan import CleanupPlan
from ckpt_cli.cleanup.retention import plan_cleanup
from ckpt_cli.core.activity import DEFAULT_MIN_AGE_SECONDS
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.engine import Engine
from ckpt_cli.errors import CkptError, NotACheckpoint
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.results import FieldsJson, Result
from ckpt_cli.storage import FileEntry, Listing, Storage


def find_checkpoints(listing: Iterable[FileEntry]) -> dict[str, list[FileEntry]]:
    """Checkpoint roots under a prefix (from one listing of it), each with its own entries
    (paths relative to that root). A root is a directory holding a ``metadata`` file or
    ``offsets/``/``commits/`` entries; ``_metadata`` directories inside state are not roots."""
    entries = list(listing)
    roots: set[str] = set()
    for e in entries:
        parts = e.path.split("/")
        if parts[-1] == "metadata" and (len(parts) < 2 or parts[-2] != "_metadata"):
            if "state" not in parts[:-1]:
                roots.add("/".join(parts[:-1]))
        elif len(parts) >= 2 and parts[-2] in ("offsets", "commits") and parts[-1].isdigit():
            roots.add("/".join(parts[:-2]))
    # The innermost root owns a file; a checkpoint never nests inside another's state/.
    ordered = sorted(roots, key=lambda r: -r.count("/") if r else 0)
    found: dict[str, list[FileEntry]] = {r: [] for r in roots}
    for e in entries:
        for root in ordered:
            prefix = f"{root}/" if root else ""
            if e.path.startswith(prefix):
                found[root].append(e._replace(path=e.path[len(prefix) :]))
                break
    return found


@dataclass(frozen=True)
class _ScanSettings:
    base: Storage
    retain: int | None
    min_age: float
    now: float


_SCAN: _ScanSettings | None = None


def _init_scan(settings: _ScanSettings) -> None:
    global _SCAN
    _SCAN = settings


@dataclass(frozen=True)
class ScanFailure(FieldsJson):
    """A checkpoint under the prefix that could not be planned (the others still are)."""

    checkpoint: str
    error: str


@dataclass(frozen=True)
class OrphanScan(Result):
    """``ckpt orphans --recursive``: a plan or a failure per checkpoint, in path order. Problems
    when any checkpoint has files to remove or could not be planned."""

    checkpoints: list[CleanupPlan | ScanFailure]

    @property
    def ok(self) -> bool:
        return all(isinstance(c, CleanupPlan) and c.ok for c in self.checkpoints)

    def body_json(self) -> dict[str, Any]:
        return {
            "checkpoints": [
                c.body_json() if isinstance(c, CleanupPlan) else c.to_json()
                for c in self.checkpoints
            ],
        }


def _scan_one(unit: tuple[str, list[FileEntry]]) -> CleanupPlan | ScanFailure:
    settings = _SCAN
    assert settings is not None
    root, entries = unit
    base = settings.base
    storage = base.child(root)
    try:
        ckpt = Checkpoint(storage, Listing(entries))
        plan = plan_cleanup(
            ckpt, retain=settings.retain, min_age=settings.min_age, now=settings.now
        )
    except CkptError as exc:
        return ScanFailure(storage.url, exc.message)
    return plan


def scan_orphans(
    storage: Storage,
    engine: Engine,
    *,
    retain: int | None = None,
    min_age: float = DEFAULT_MIN_AGE_SECONDS,
    now: float | None = None,
    progress: ProgressSink = NULL_PROGRESS,
) -> OrphanScan:
    """``orphans --recursive``: one listing of the prefix, then every checkpoint under it planned
    on ``engine`` (this machine or Spark); plans (or errors) in path order."""
    found = find_checkpoints(storage.list_all(progress))
    if not found:
        raise NotACheckpoint(
            f"{storage.url}: no checkpoint under this prefix",
            hint="a checkpoint is a directory with a metadata file and offsets/ or commits/",
        )
    units = sorted(found.items())
    settings = _ScanSettings(storage, retain, min_age, time.time() if now is None else now)
    return OrphanScan(engine.map(_scan_one, units, initializer=_init_scan, initargs=(settings,)))
