"""Undoing a reversible change (``repair``, ``repartition``) from its manifest: every moved or
rewritten file back, every created one removed, and the manifest marked undone.

Every command that changes a checkpoint undoes the same way: by default the newest manifest of
that command in ``<checkpoint>.ckpt-quarantine/``, or the one given; a manifest already undone
is left as it is and said so (:attr:`UndoResult.already_undone`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ckpt_cli.change.lock import checkpoint_lock
from ckpt_cli.change.manifest import quarantine_home
from ckpt_cli.change.safety import links_refused
from ckpt_cli.core.layout import FileKind, classify_listing
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.errors import CheckpointNotFound, CkptError, FormatError, SafetyCheckError
from ckpt_cli.results import Report
from ckpt_cli.storage import Storage

# What each command's manifest holds besides the changes: how one is told from another.
MANIFEST_KEYS = {
    "repair": "plan",
    "repartition": "repartition",
    "convert": "convert",
    "delete": "delete",
}
# What a command's change is called in a sentence.
CHANGE_NOUNS = {"convert": "conversion", "delete": "deletion"}


@dataclass(frozen=True)
class UndoResult(Report):
    """``--undo``: what was put back (always ok: a failed undo raises). ``already_undone``:
    when an earlier undo of this manifest happened (ISO 8601 UTC); nothing was changed."""

    checkpoint: str
    restored: int  # files moved back or rewritten with their original bytes
    removed: int  # files the change had created
    manifest: str = ""
    already_undone: str | None = None

    def body_json(self) -> dict[str, Any]:
        return asdict(self)


def iso_time(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def manifest_command(body: object) -> str | None:
    """The command whose manifest ``body`` is (``repair``, ``repartition``), or None."""
    if not isinstance(body, dict) or "changes" not in body or "checkpoint" not in body:
        return None
    return next((c for c, key in MANIFEST_KEYS.items() if key in body), None)


def newest_manifest(storage: Storage, command: str) -> tuple[str, dict[str, Any]]:
    """The newest manifest of ``command`` in ``<checkpoint>.ckpt-quarantine/`` (undone or
    not: a second undo says so rather than undoing an older run), and its body."""
    home = quarantine_home(storage)
    shown = f"{storage.url.rstrip('/')}.ckpt-quarantine"
    none = CkptError(
        f"{storage.url}: no {command} to undo (no {command} manifest in {shown}/)",
        hint="give the manifest of a run whose --quarantine was elsewhere with --manifest FILE",
    )
    folder = storage.elsewhere(home)
    try:
        entries = list(folder.list_all())
    except CheckpointNotFound as exc:
        raise none from exc
    found = []
    for entry in entries:
        if entry.path.count("/") != 1 or not entry.path.endswith("/manifest.json"):
            continue
        try:
            body = json.loads(folder.read_bytes(entry.path))
        except ValueError:
            continue  # not one of ours (or cut short): the others may be
        if manifest_command(body) == command:
            found.append((float(body.get("created") or 0), f"{home}/{entry.path}", body))
    if not found:
        raise none
    _, path, body = max(found, key=lambda x: (x[0], x[1]))
    return path, body


def read_manifest(storage: Storage, manifest: str, command: str) -> dict[str, Any]:
    """The body of ``manifest``, checked to be ``command``'s and of this checkpoint."""
    try:
        body = json.loads(storage.read_text_absolute(manifest))
    except CheckpointNotFound as exc:
        raise CkptError(f"{manifest}: no such manifest") from exc
    except CkptError as exc:
        raise CkptError(f"{manifest}: not a readable {command} manifest: {exc.message}") from exc
    except (ValueError, RecursionError) as exc:
        raise CkptError(f"{manifest}: not a readable {command} manifest: {exc}") from exc
    made_by = manifest_command(body)
    if made_by is None:
        raise CkptError(f"{manifest}: not a ckpt {command} manifest")
    if made_by != command:
        raise CkptError(
            f"{manifest}: a {made_by} manifest, not a {command} one",
            hint=f"undo it with ckpt {made_by} CHECKPOINT --undo --manifest {manifest}",
        )
    if body["checkpoint"] != storage.root:
        raise CkptError(
            f"{manifest}: the manifest of {body.get('checkpoint_url') or body['checkpoint']}, "
            f"not of {storage.url}"
        )
    return dict(body)


def undo_repair(
    storage: Storage, *, manifest: str | None = None, break_lock: bool = False
) -> UndoResult:
    """Put back every file the newest repair of this checkpoint (or the one of ``manifest``)
    moved or rewrote, and remove what it created, under the checkpoint lock; nothing is moved
    from outside the manifest's quarantine."""
    return undo_change(storage, "repair", manifest=manifest, break_lock=break_lock)


def undo_change(
    storage: Storage,
    command: str,
    *,
    manifest: str | None = None,
    break_lock: bool = False,
    check: Callable[[dict[str, Any]], None] | None = None,
) -> UndoResult:
    """Undo ``command``'s newest run (or the one of ``manifest``); ``check(body)`` refuses
    before anything changes. A manifest undone already changes nothing."""
    if manifest is None:
        manifest, body = newest_manifest(storage, command)
    else:
        body = read_manifest(storage, manifest, command)
    if body.get("undone"):
        return UndoResult(storage.url, 0, 0, manifest, iso_time(float(body["undone"])))
    if check is not None:
        check(body)
    with checkpoint_lock(storage, f"ckpt {command} --undo", break_lock=break_lock):
        restored, removed = _put_back(storage, manifest, body)
        body["undone"] = time.time()
        storage.write_bytes_absolute(
            manifest,
            json.dumps(body, indent=1).encode(),
            within=manifest.rpartition("/")[0],
            atomic=True,
        )
    return UndoResult(storage.url, restored, removed, manifest)


def batch_change_undo(command: str, module: str, doc: str) -> Callable[..., UndoResult]:
    """``undo_<command>`` of module ``module``, documented by ``doc``: ``undo_change`` of a
    command that writes a batch (``repartition``, ``convert``: its manifest names it), with
    the signature ``(storage, *, manifest=None, force=False, break_lock=False)``. Refused
    before anything changes when the checkpoint has symbolic links, and (unless ``force``)
    when the query ran batches after it: undoing would throw their state away."""
    change = CHANGE_NOUNS.get(command, command)

    def undo(
        storage: Storage,
        *,
        manifest: str | None = None,
        force: bool = False,
        break_lock: bool = False,
    ) -> UndoResult:
        def check(body: dict[str, Any]) -> None:
            batch = int(body[MANIFEST_KEYS[command]]["batch"])
            ckpt = Checkpoint.open(storage)
            links = links_refused(ckpt)
            if links:
                raise SafetyCheckError(f"{storage.url}: not undoing the {change}: {links[0]}")
            later = [b for b in ckpt.batches.offsets + ckpt.batches.commits if b > batch]
            if later and not force:
                raise SafetyCheckError(
                    f"{storage.url}: the query ran batch {max(later)} after the {change} "
                    f"(batch {batch}); undoing it would lose that state",
                    hint="pass force=True to undo anyway",
                )

        return undo_change(storage, command, manifest=manifest, break_lock=break_lock, check=check)

    # The API's methods and the docs read these: the function is the module's undo_<command>.
    undo.__name__ = undo.__qualname__ = f"undo_{command}"
    undo.__module__ = module
    undo.__doc__ = doc
    return undo


def _put_back(storage: Storage, manifest: str, body: dict[str, Any]) -> tuple[int, int]:
    within = str(body.get("quarantine") or manifest.rsplit("/", 1)[0])
    restored = removed = 0
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
    return restored, removed


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
