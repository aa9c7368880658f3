"""Undoing a repair from its manifest: every moved or rewritten file back, every created one
removed."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from ckpt_cli.errors import CheckpointNotFound, CkptError, FormatError
from ckpt_cli.layout import FileKind, classify_listing
from ckpt_cli.lock import checkpoint_lock
from ckpt_cli.results import Report
from ckpt_cli.storage import Storage, StorageStats


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
    stats: StorageStats | None = None,
    command: str = "ckpt repair --undo",
) -> UndoResult:
    """Put every file a repair moved or rewrote back, and remove what it created, under the
    checkpoint lock; nothing is moved from outside the manifest's quarantine. ``stats``
    counts the requests made (default: not kept)."""
    # The manifest's folder: its filesystem (bucket, container) is where the manifest is read.
    folder = Storage.from_url(manifest.rpartition("/")[0] or manifest, storage_options, stats)
    try:
        body = json.loads(folder.read_text_absolute(manifest))
    except CheckpointNotFound as exc:
        raise CkptError(f"{manifest}: no such manifest") from exc
    except CkptError as exc:
        raise CkptError(f"{manifest}: not a readable repair manifest: {exc.message}") from exc
    except (ValueError, RecursionError) as exc:
        raise CkptError(f"{manifest}: not a readable repair manifest: {exc}") from exc
    if not isinstance(body, dict) or "changes" not in body or "checkpoint" not in body:
        raise CkptError(f"{manifest}: not a ckpt repair manifest")
    root = body["checkpoint"]
    url = str(body.get("checkpoint_url") or root)
    location = root if "://" not in url else f"{url.split('://', 1)[0]}://{root.lstrip('/')}"
    storage = Storage.from_url(location, storage_options, stats)
    within = str(body.get("quarantine") or manifest.rsplit("/", 1)[0])
    restored = removed = 0
    with checkpoint_lock(storage, command, break_lock=break_lock):
        for change in reversed(body["changes"]):
            path = change["path"]
            # A change not marked done was interrupted: it may or may not have happened.
            interrupted = change.get("done") is False
            if change["change"] == "moved":
                if interrupted and not storage.exists_absolute(change["to"]):
                    continue  # never moved
                storage.move_in(change["to"], path, within=within)
                restored += 1
            elif change["change"] == "rewritten":
                original = storage.check_within(change["original"], within, change["original"])
                storage.write_bytes(path, storage.read_bytes_absolute(original))
                restored += 1
            elif change["change"] == "created":
                if interrupted and not storage.exists_absolute(storage.contained(path)):
                    continue  # never written
                storage.delete_many([path])
                removed += 1
            else:
                raise FormatError(manifest, f"unknown change {change['change']!r}")
        _remove_temp_files(storage, body["changes"])
    return UndoResult(url, restored, removed)


def _remove_temp_files(storage: Storage, changes: list[dict[str, Any]]) -> None:
    """The temp files of atomic writes a kill interrupted (``.<name>.<uuid>.tmp`` beside a
    file the manifest says was being written)."""
    interrupted = {c["path"] for c in changes if c.get("done") is False and c["change"] != "moved"}
    if not interrupted or not storage.is_local:  # object stores write whole objects
        return
    temps = [
        f.path
        for f in classify_listing(storage.list_all())
        if f.kind is FileKind.TEMP and f.target in interrupted
    ]
    storage.delete_many(temps)
