"""``ckpt relocate --undo``: remove the copy a relocation made (or began) in the new home.

The copy is told by its files: every one is a file of the source checkpoint by the same
relative path (the rewritten ones too), the run's marker, or an unfinished atomic write.
Anything else in the new home (a batch the query ran on the copy, someone else's file)
stops the undo unless ``force``: removing it would lose what only the copy has. The source
must still be there for the same reason: without it the copy may be the only one.

Order: the marker first (so a removal that ends early is an unfinished copy of this source,
which ``ckpt relocate`` resumes and ``--undo`` finishes), every other file, the marker last.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from ckpt_cli.change.lock import checkpoint_lock
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.errors import CheckpointNotFound
from ckpt_cli.formats.names import parse_temp_name
from ckpt_cli.relocate.plan import MARKER, RelocateRefused
from ckpt_cli.results import Report, fields_json
from ckpt_cli.storage import Storage


@dataclass(frozen=True)
class RelocateUndoResult(Report):
    """What ``--undo`` removed from the new home ``dest`` (``removed`` files; ``others``:
    files the source does not have, removed with ``force``)."""

    source: str
    dest: str
    removed: int
    others: int = 0

    def body_json(self) -> dict[str, Any]:
        return fields_json(self, "source dest removed others")


def undo_relocate(
    storage: Storage,
    dest: Storage | str,
    *,
    force: bool = False,
    break_lock: bool = False,
    storage_options: dict[str, object] | None = None,
) -> RelocateUndoResult:
    """Remove the copy of the checkpoint at ``storage`` in ``dest`` (a path or URL;
    finished or not), under the checkpoint's lock (no relocation copies while it runs;
    ``break_lock``: the lock of a run that was killed). Refused when the source is gone, or
    (unless ``force``) when ``dest`` holds files the source does not have."""
    if isinstance(dest, str):
        dest = Storage.from_url(dest, storage_options)
    target = dest
    try:
        with checkpoint_lock(storage, "ckpt relocate --undo", break_lock=break_lock):
            return _remove_copy(storage, target, force=force)
    except CheckpointNotFound as exc:
        raise _source_gone(storage, target) from exc


def _source_gone(storage: Storage, dest: Storage) -> RelocateRefused:
    return RelocateRefused(
        f"{storage.url}: the checkpoint is not there; its copy in {dest.url} may be the only "
        "one left, so it is not removed",
        hint="remove the copy by hand if you are sure",
    )


def _remove_copy(storage: Storage, dest: Storage, *, force: bool) -> RelocateUndoResult:
    try:
        source = Checkpoint.open(storage)
    except CheckpointNotFound as exc:
        raise _source_gone(storage, dest) from exc
    try:
        listed = sorted(e.path for e in dest.list_all())
    except CheckpointNotFound:
        listed = []
    if not listed:
        return RelocateUndoResult(storage.url, dest.url, 0)
    others = [
        p
        for p in listed
        if p != MARKER
        and source.listing.get(p) is None
        and parse_temp_name(p.rpartition("/")[2]) is None
    ]
    if others and not force:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise RelocateRefused(
            f"{dest.url}: holds {len(others)} files the checkpoint at {storage.url} does not "
            f"({shown}): the query ran on the copy, or they are not ckpt's; not removing it",
            hint="--force removes them with the copy",
        )
    marker = {"source": storage.url, "dest": dest.url, "started": time.time(), "undo": True}
    dest.write_bytes(MARKER, json.dumps(marker).encode(), atomic=True)
    files = [p for p in listed if p != MARKER]
    dest.delete_many(files)
    dest.delete_many([MARKER])
    # Local directories the copy made, deepest first (object stores have none).
    dirs = {rel.rsplit("/", i)[0] for rel in files for i in range(1, rel.count("/") + 1)}
    for rel in sorted(dirs, key=lambda d: (-d.count("/"), d)):
        dest.remove_empty_dir(dest.full_path(rel))
    return RelocateUndoResult(storage.url, dest.url, len(files), len(others))


__all__ = ["RelocateUndoResult", "undo_relocate"]
