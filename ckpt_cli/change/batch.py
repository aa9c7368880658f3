"""The writer of a new batch: how a command changes a checkpoint's state the way Spark would
(a repartition today; a provider or format conversion, or a batch that deletes keys next).

Spark restarts from the last committed batch N by loading state version N+1. A change
writes batch N+1 itself:

1. ``offsets/N+1``: a copy of ``offsets/N``, with the confs the change needs. From here on
   the batch is in flight: a restart re-runs it (and Spark 4.2+ refuses to start while a
   repartition batch is uncommitted), so no batch of the query can write the files below;
2. the state files of version N+2, each (and its checksum) atomically;
3. the operator metadata the new state needs;
4. ``commits/N+1`` last: the change is done when it exists.

Every file is recorded in the change's write-ahead manifest before it is written (as
``created``, or ``rewritten`` with its original saved), so a kill at any point leaves a
checkpoint that is untouched, finishable (the command again) or undoable (``--undo``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from ckpt_cli.change.manifest import Manifest
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.errors import CkptError
from ckpt_cli.formats.checksums import hadoop_crc_bytes
from ckpt_cli.formats.names import hadoop_crc_name
from ckpt_cli.results import fields_json

if TYPE_CHECKING:
    from ckpt_cli.validate import ValidationReport

ResultT = TypeVar("ResultT", bound="BatchChangeResult")


class NewBatch:
    """What the plan of a change that writes a batch knows: the last committed batch N
    (``last_committed``), the batch it writes (N+1) and the state version that batch gives
    every partition (N+2). A plan is something to apply, not a problem: refusals raise."""

    last_committed: int

    @property
    def batch(self) -> int:
        return self.last_committed + 1

    @property
    def version(self) -> int:
        return self.last_committed + 2

    @property
    def ok(self) -> bool:
        return True


@dataclass(frozen=True)
class BatchChangeResult:
    """What applying a change that writes a batch did: the files written (path -> size), its
    manifest (what ``--undo`` restores from), notes, and the validation after. A command's
    result adds its own fields, shown in ``to_json`` between these (``DETAILS``)."""

    DETAILS: ClassVar[str] = ""

    manifest: str
    written: dict[str, int]
    validation: ValidationReport
    notes: list[str] = field(default_factory=list)

    @classmethod
    def finish(
        cls: type[ResultT], manifest: Manifest, out: BatchWriter, notes: list[str], **details: Any
    ) -> ResultT:
        """The manifest marked complete, then the validation of the checkpoint as Spark will
        restart it, and the result of it all with the command's ``details``."""
        from ckpt_cli.validate import validate

        manifest.save(complete=True)
        after = validate(Checkpoint.open(out.storage))
        return cls(
            manifest=manifest.path, written=out.written, validation=after, notes=notes, **details
        )

    def to_json(self) -> dict[str, Any]:
        return fields_json(
            self,
            f"manifest written {self.DETAILS} notes validation",
            written=[{"path": p, "size": s} for p, s in sorted(self.written.items())],
            validation=self.validation.body_json(),
        )


class FileWriter(Protocol):
    """Where a new version's files go: the checkpoint (:class:`BatchWriter`), or an engine
    task's staging area."""

    def write(self, rel: str, data: bytes, *, sidecar: bool = True) -> None: ...


class BatchWriter:
    """Checkpoint files written atomically, each recorded in the manifest first: ``created``,
    or ``rewritten`` with its original saved when it is there (an unfinished attempt's)."""

    def __init__(self, ckpt: Checkpoint, manifest: Manifest) -> None:
        self.ckpt = ckpt
        self.storage = ckpt.storage
        self.manifest = manifest
        self.written: dict[str, int] = {}
        self.rewritten: list[str] = []

    def write(self, rel: str, data: bytes, *, sidecar: bool = True) -> None:
        files = [(rel, data)]
        if sidecar and self.storage.is_local:
            # Hadoop's local file system writes one beside every file Spark writes.
            files.append((hadoop_crc_name(rel), hadoop_crc_bytes(data)))
        for path, body in files:
            pending = self._intend(path)
            self.storage.write_bytes(path, body, atomic=True)
            self.written[path] = len(body)
            self.manifest.done(pending)

    def upload(self, rel: str, local: Path) -> None:
        """A file built locally, written as ``rel`` (streamed)."""
        pending = self._intend(rel)
        self.storage.write_file(rel, str(local), atomic=True)
        self.written[rel] = local.stat().st_size
        self.manifest.done(pending)

    def move_in(self, rel: str, location: str, size: int, *, within: str) -> None:
        """A file built elsewhere on this filesystem (engine=spark's staging) moved in as
        ``rel``: a rename locally, one server-side copy on object stores, so it appears
        whole."""
        pending = self._intend(rel)
        self.storage.move_in(location, rel, within=within)
        self.written[rel] = size
        self.manifest.done(pending)

    def _intend(self, rel: str) -> list[dict[str, Any]]:
        if self.ckpt.listing.get(rel) is not None:
            self.rewritten.append(rel)
            return self.manifest.save_original(rel)
        return self.manifest.intend({"change": "created", "path": rel})


def next_offsets(
    ckpt: Checkpoint, last: int, confs: Mapping[str, str] | None = None, *, add: bool = False
) -> bytes:
    """``offsets/N`` for batch N+1, with ``confs`` set to new values (each in its conf
    already: Spark copies the OffsetSeq and replaces the value; its JSON is the same but for
    those values). ``add``: a conf it lacks (an older Spark's, which restarts with the
    session's value then) is added at the start of its conf."""
    text = ckpt.storage.read_bytes(f"offsets/{last}").decode("utf-8")
    head, sep, rest = text.partition("\n")
    meta, nl, sources = rest.partition("\n")
    for key, value in (confs or {}).items():
        pattern = re.compile(r'("' + re.escape(key) + r'"\s*:\s*")[^"]*(")')
        meta, count = pattern.subn(_replacing(value), meta)
        if count == 0 and add:
            conf = r'("conf"\s*:\s*\{)(\s*\}?)'
            meta, count = re.subn(conf, _adding(key, value), meta, count=1)
        if count != 1:
            raise CkptError(f"offsets/{last}: expected one {key} in its conf")
    return f"{head}{sep}{meta}{nl}{sources}".encode()


def _replacing(value: str) -> Callable[[re.Match[str]], str]:
    return lambda m: f"{m[1]}{value}{m[2]}"


def _adding(key: str, value: str) -> Callable[[re.Match[str]], str]:
    """``"key":"value"`` first in the conf object (a comma after it unless it is empty)."""
    entry = json.dumps({key: value}, separators=(",", ":"))[1:-1]
    return lambda m: f"{m[1]}{entry}{m[2] if m[2].strip() else ',' + m[2]}"


def next_commit(
    ckpt: Checkpoint,
    last: int,
    unique_ids: dict[int, list[list[str]]],
    format_version: int | None = None,
) -> bytes:
    """``commits/N`` for batch N+1; in checkpoint format v2 with ``stateUniqueIds`` naming
    the new files (operator -> partition -> store). ``format_version`` (a conversion): the
    header of that format, without ``stateUniqueIds`` in v1. Spark 4.3 takes the state's
    checkpoint format from the newest commit's header (``CheckpointVersionManager``), so
    this header is what moves a query to another format."""
    data = ckpt.storage.read_bytes(f"commits/{last}")
    if not unique_ids and format_version is None:
        return data
    head, _, body = data.decode("utf-8").partition("\n")
    obj = json.loads(body) if body.strip() else {}
    if format_version is not None:
        head = f"v{format_version}"
        obj.pop("stateUniqueIds", None)
    if unique_ids:
        obj["stateUniqueIds"] = {str(op): rows for op, rows in sorted(unique_ids.items())}
    return f"{head}\n{json.dumps(obj, separators=(',', ':'))}".encode()


def write_batch(
    out: BatchWriter,
    *,
    last: int,
    state: Callable[[BatchWriter], dict[int, list[list[str]]]],
    confs: Mapping[str, str] | None = None,
    metadata: Callable[[], Mapping[str, bytes]] = dict,
    offsets_written: bool = False,
    add_confs: bool = False,
    format_version: int | None = None,
) -> None:
    """Batch ``last + 1`` in the order above: its offsets entry (with ``confs``; unless
    ``offsets_written``, an earlier attempt's; ``add_confs``: see ``next_offsets``), the
    state ``state(out)`` writes (it returns the uniqueIds of format v2, or nothing), the
    operator ``metadata``, then the commit (in ``format_version``'s header: see
    ``next_commit``)."""
    batch = last + 1
    ckpt = out.ckpt
    if not offsets_written:
        out.write(f"offsets/{batch}", next_offsets(ckpt, last, confs, add=add_confs))
    unique_ids = state(out)
    for path, data in metadata().items():
        out.write(path, data)
    out.write(f"commits/{batch}", next_commit(ckpt, last, unique_ids, format_version))
