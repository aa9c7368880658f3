"""The write-ahead manifest of a reversible change to a checkpoint (``repair``,
``repartition``): each change is recorded before it is made and marked done after, so a
command killed at any point can be undone (:func:`ckpt_cli.change.undo.undo_repair`).

Changes: ``moved`` (a file moved out to the quarantine: ``to``), ``rewritten`` (replaced; its
original bytes saved first: ``original``), ``created`` (a new file, removed by undo).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from ckpt_cli.errors import OutsideCheckpointError, SafetyCheckError
from ckpt_cli.storage import Storage


def check_quarantine(storage: Storage, where: str) -> None:
    """Refuse a quarantine inside the checkpoint (its own root included): Spark, validate and
    ``cleanup`` would take what it holds for checkpoint files, and cleanup could delete the
    originals an undo needs. Anywhere outside, the default beside it included, is allowed."""
    try:
        storage.check_within(f"{where.rstrip('/')}/manifest.json", storage.root, where)
    except OutsideCheckpointError:
        return
    raise SafetyCheckError(
        f"{where}: the quarantine is inside the checkpoint {storage.url}; not using it",
        hint="give --quarantine a folder outside the checkpoint (by default it is beside it: "
        "<checkpoint>.ckpt-quarantine/)",
    )


def quarantine_stamp(now: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))


def quarantine_home(storage: Storage) -> str:
    """``<checkpoint>.ckpt-quarantine``, where default quarantines go (a path of ``storage``'s
    filesystem)."""
    return f"{storage.root.rstrip('/')}.ckpt-quarantine"


def fresh_quarantine(storage: Storage, name: str, now: float) -> str:
    """A new folder ``<checkpoint>.ckpt-quarantine/<name><stamp>`` beside the checkpoint. A
    run in the same second as the last one (finishing a killed one) gets its own: sharing
    would replace the manifest the earlier run's undo needs."""
    where = base = f"{quarantine_home(storage)}/{name}{quarantine_stamp(now)}"
    taken = 1
    while storage.exists_absolute(where):
        taken += 1
        where = f"{base}-{taken}"
    return where


class Manifest:
    """``<where>/manifest.json``, replaced whole (atomically) at every step; ``body`` gives
    the command's own fields (its plan)."""

    def __init__(
        self, storage: Storage, where: str, now: float, body: Callable[[], dict[str, Any]]
    ) -> None:
        check_quarantine(storage, where)
        self.storage = storage
        self.where = where.rstrip("/")
        self.path = f"{self.where}/manifest.json"
        self.created = now
        self.changes: list[dict[str, Any]] = []
        self._body = body

    def save(self, complete: bool = False) -> None:
        body = {
            "checkpoint": self.storage.root,
            "checkpoint_url": self.storage.url,
            "quarantine": self.where,
            "created": self.created,
            "complete": complete,
            **self._body(),
            "changes": self.changes,
        }
        self.storage.write_bytes_absolute(
            self.path, json.dumps(body, indent=1).encode(), within=self.where, atomic=True
        )

    def intend(self, *changes: dict[str, Any]) -> list[dict[str, Any]]:
        """Record ``changes`` as not yet done (saved before they are made)."""
        pending = [{**c, "done": False} for c in changes]
        self.changes.extend(pending)
        self.save()
        return pending

    def done(self, pending: list[dict[str, Any]]) -> None:
        for entry in pending:
            entry["done"] = True
        self.save()

    def quarantined(self, rel: str) -> str:
        """Where a file of the checkpoint goes in the quarantine (moved or its original)."""
        return f"{self.where}/files/{rel}"

    def move_out(self, rel: str) -> None:
        """Checkpoint file ``rel`` moved to the quarantine, recorded before and after."""
        dest = self.quarantined(rel)
        pending = self.intend({"change": "moved", "path": rel, "to": dest})
        self.storage.move_out(rel, dest, within=self.where)
        self.done(pending)

    def save_original(self, rel: str) -> list[dict[str, Any]]:
        """Before ``rel`` is replaced: its bytes saved whole, then the change recorded, so
        undo can always write them back."""
        dest = self.quarantined(rel)
        self.storage.write_bytes_absolute(dest, self.storage.read_bytes(rel), within=self.where)
        return self.intend({"change": "rewritten", "path": rel, "original": dest})
