"""Carrying a relocation out: a marker in the new home first, every file copied (streamed,
atomically on local disk, whole objects on object stores; the rewritten ones with their
references changed and a new checksum sidecar), a validation of the copy, the marker
removed last. The source is only read.

A run that ends early leaves the marker: ``ckpt relocate`` again with the same source and
new home resumes it (the files already there with their size are not copied again; the
rewritten ones are written again); or delete the new home.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from ckpt_cli.core.layout import FileKind
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.formats.checksums import hadoop_crc_bytes
from ckpt_cli.formats.names import hadoop_crc_name, parse_temp_name
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.relocate.plan import MARKER, RelocatePlan, Rewrite
from ckpt_cli.results import fields_json
from ckpt_cli.storage import Storage
from ckpt_cli.validate import ValidationReport, validate


@dataclass(frozen=True)
class RelocateResult:
    """What :func:`relocate` wrote in the new home, and the validation of the copy."""

    dest: str
    copied: int
    rewritten: int
    kept: int  # already there from an earlier run
    bytes: int
    validation: ValidationReport
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return fields_json(
            self,
            "dest copied rewritten kept bytes notes validation",
            validation=self.validation.body_json(),
        )


def relocate(
    ckpt: Checkpoint, plan: RelocatePlan, dest: Storage, progress: ProgressSink = NULL_PROGRESS
) -> RelocateResult:
    """Copy ``ckpt`` into ``dest`` as ``plan`` says (the caller holds the source's lock and
    has checked that its query is stopped)."""
    source = ckpt.storage
    rewrites: dict[str, list[Rewrite]] = {}
    for r in plan.rewrites:
        rewrites.setdefault(r.path, []).append(r)
    there = {}
    if plan.resuming:
        there = {e.path: e.size for e in dest.list_all()}
        temps = [p for p in there if parse_temp_name(p.rpartition("/")[2]) is not None]
        dest.delete_many(temps)  # a dying run's unfinished writes
    dest.write_bytes(MARKER, _marker(plan), atomic=True)
    # The file each Hadoop checksum covers, as the listing classified it.
    covers = {f.path: f.target for f in ckpt.of_kind(FileKind.HADOOP_CRC)}
    copied = rewritten = kept = written_bytes = 0
    progress.start("Copying", total=len(plan.files))
    try:
        for rel in plan.files:
            progress.advance()
            if covers.get(rel) in rewrites:
                continue  # a checksum of the old bytes: a new one is written with them
            if rel in rewrites:
                data = rewritten_bytes(source.read_bytes(rel).decode("utf-8"), rewrites[rel])
                dest.write_bytes(rel, data, atomic=True)
                crc = hadoop_crc_name(rel)
                if dest.is_local and ckpt.listing.get(crc) is not None:
                    dest.write_bytes(crc, hadoop_crc_bytes(data), atomic=True)
                rewritten += 1
                written_bytes += len(data)
                continue
            entry = ckpt.listing.get(rel)
            size = entry.size if entry is not None else None
            if there.get(rel) == size and size is not None:
                kept += 1
                continue
            dest.write_pieces(rel, source.read_pieces(rel), atomic=True)
            copied += 1
            written_bytes += size or 0
    finally:
        progress.close()
    after = validate(Checkpoint.open(dest))
    dest.delete_many([MARKER])
    return RelocateResult(dest.url, copied, rewritten, kept, written_bytes, after, plan.notes)


def rewritten_bytes(text: str, rewrites: list[Rewrite]) -> bytes:
    """``text`` with each rewrite's ``old`` prefix replaced where a JSON string starts with
    it: an input file's ``"path"`` in a source log, a schema file's home in operator
    metadata v2."""
    for r in rewrites:
        if r.path.startswith("sources/"):
            text = text.replace(f'"path":"{r.old}', f'"path":"{r.new}')
        else:
            text = text.replace(f'"{r.old}/state/', f'"{r.new}/state/')
    return text.encode("utf-8")


def _marker(plan: RelocatePlan) -> bytes:
    body = {"source": plan.source, "dest": plan.dest, "started": time.time()}
    return json.dumps(body).encode()
