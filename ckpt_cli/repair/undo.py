"""Undoing a repair from its manifest: every moved or rewritten file back, every created one
removed."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from ckpt_cli import storage_write as sw
from ckpt_cli.errors import CkptError, FormatError
from ckpt_cli.lock import checkpoint_lock
from ckpt_cli.results import Report
from ckpt_cli.storage import Storage, fsspec_options


@dataclass(frozen=True)
class UndoResult(Report):
    """``ckpt repair --undo``: what was put back (always ok: a failed undo raises)."""

    checkpoint: str
    restored: int  # files moved back or rewritten with their original bytes
    removed: int  # files the repair had created

    def body_json(self) -> dict[str, Any]:
        return asdict(self)


def undo_repair(
    manifest: str,
    storage_options: dict[str, Any] | None = None,
    *,
    break_lock: bool = False,
) -> UndoResult:
    """Put every file a repair moved or rewrote back, and remove what it created, under the
    checkpoint lock; nothing is moved from outside the manifest's quarantine."""
    import fsspec.core

    try:
        options = fsspec_options(manifest, storage_options)
        with fsspec.core.open(manifest, "r", encoding="utf-8", **options) as fh:
            body = json.load(fh)
    except FileNotFoundError as exc:
        raise CkptError(f"{manifest}: no such manifest") from exc
    except (OSError, json.JSONDecodeError, RecursionError) as exc:
        raise CkptError(f"{manifest}: not a readable repair manifest: {exc}") from exc
    if not isinstance(body, dict) or "changes" not in body or "checkpoint" not in body:
        raise CkptError(f"{manifest}: not a ckpt repair manifest")
    root = body["checkpoint"]
    url = str(body.get("checkpoint_url") or root)
    location = root if "://" not in url else f"{url.split('://', 1)[0]}://{root.lstrip('/')}"
    storage = Storage.from_url(location, storage_options)
    within = str(body.get("quarantine") or manifest.rsplit("/", 1)[0])
    restored = removed = 0
    with checkpoint_lock(storage, "ckpt repair --undo", break_lock=break_lock):
        for change in reversed(body["changes"]):
            path = change["path"]
            # A change not marked done was interrupted: it may or may not have happened.
            interrupted = change.get("done") is False
            if change["change"] == "moved":
                if interrupted and not sw.exists_absolute(storage, change["to"]):
                    continue  # never moved
                sw.move_in(storage, change["to"], path, within=within)
                restored += 1
            elif change["change"] == "rewritten":
                original = storage.check_within(change["original"], within, change["original"])
                sw.write_bytes(storage, path, sw.read_bytes_absolute(storage, original))
                restored += 1
            elif change["change"] == "created":
                if interrupted and not sw.exists_absolute(storage, storage.contained(path)):
                    continue  # never written
                storage.delete_many([path])
                removed += 1
            else:
                raise FormatError(manifest, f"unknown change {change['change']!r}")
    return UndoResult(url, restored, removed)
