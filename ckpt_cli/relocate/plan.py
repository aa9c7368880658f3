"""Planning ``ckpt relocate``: every file of a checkpoint copied to a new home, and the
absolute references to a home that Spark recorded rewritten on the way.

What Spark 3.3-4.3 records by absolute URL (docs/state-formats.md §7, the fixtures):

* operator metadata v2 (``state/<op>/_metadata/v2/<batch>``, transformWithState):
  ``stateSchemaFilePaths``, the schema files under the directory the query ran in
  (``file:/…/checkpoint/state/0/_stateSchema/default/0_<uuid>``). Spark reads them from
  there at restart, so a copy names its old home until they are rewritten;
* the file source's log (``sources/<n>/<batch>`` and its ``<batch>.compact`` files): every
  input file it has read, by URL. A query whose input folder moved would see every file
  as new; ``--input OLD=NEW`` rewrites the prefix.

Nothing else in a checkpoint names a location (offsets and commits hold offsets and
watermarks; ``metadata`` the query id; state files rows).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ckpt_cli.core.layout import FileKind
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.errors import CheckpointNotFound, CkptError, UsageError
from ckpt_cli.formats.names import parse_temp_name
from ckpt_cli.formats.tws import parse_operator_metadata_v2, same_location, schema_homes
from ckpt_cli.results import Result, fields_json
from ckpt_cli.storage import Storage

# Written first into the new home and removed last: a run that ends early is resumed.
MARKER = ".ckpt-relocating"
# Files never copied: Spark's and ckpt's leftovers (temp files, the lock).
_SKIPPED = frozenset({FileKind.TEMP, FileKind.CKPT_LOCK})


class RelocateRefused(CkptError, code="RELOCATE_REFUSED"):
    """``ckpt relocate`` will not run (the message says why)."""


@dataclass
class Rewrite:
    """A file whose references are rewritten: how many, and from what to what."""

    path: str
    references: int
    old: str
    new: str

    def to_json(self) -> dict[str, Any]:
        return fields_json(self, "path references old new")


@dataclass
class RelocatePlan(Result):
    """What ``ckpt relocate`` copies from ``source`` to ``dest`` (``files``, ``bytes``) and
    which files it rewrites on the way. ``spark_home``: the new home as Spark will name it
    in what it records. ``resuming``: ``dest`` holds an earlier run that ended early."""

    source: str
    dest: str
    spark_home: str
    files: list[str] = field(default_factory=list, repr=False)
    bytes: int = 0
    homes: list[str] = field(default_factory=list)  # old homes the metadata names
    rewrites: list[Rewrite] = field(default_factory=list)
    inputs: list[tuple[str, str]] = field(default_factory=list)
    resuming: bool = False
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return True  # refusals raise

    def body_json(self) -> dict[str, Any]:
        return fields_json(
            self,
            "source dest spark_home files bytes homes rewrites inputs resuming notes warnings",
            files=len(self.files),
            inputs=[{"old": old, "new": new} for old, new in self.inputs],
        )


def parse_inputs(pairs: list[str]) -> list[tuple[str, str]]:
    """``OLD=NEW`` prefixes of input file URLs (a plain absolute path ``/x`` is ``file:///x``,
    as the file source records it)."""
    found = []
    for pair in pairs:
        old, sep, new = pair.partition("=")
        if not sep or not old or not new:
            raise UsageError(f"--input {pair}: give OLD=NEW (prefixes of the input files' URLs)")
        found.append((_as_url(old), _as_url(new)))
    return found


def _as_url(prefix: str) -> str:
    return f"file://{prefix}" if prefix.startswith("/") else prefix


def plan_relocate(
    ckpt: Checkpoint,
    dest: Storage,
    *,
    inputs: list[tuple[str, str]] | None = None,
    spark_home: str | None = None,
) -> RelocatePlan:
    """Plan the copy of ``ckpt`` to ``dest`` (which must not exist, or be empty, or hold an
    earlier run of this copy); nothing is written."""
    source = ckpt.storage
    if ckpt.listing.symlinks:
        rel, target = next(iter(ckpt.listing.symlinks.items()))
        raise RelocateRefused(
            f"{source.url}: {rel} is a symbolic link (to {target}); ckpt does not follow links"
        )
    if not ckpt.files:
        raise RelocateRefused(f"{source.url}: no checkpoint files to relocate")
    plan = RelocatePlan(
        source=source.url,
        dest=dest.url,
        spark_home=(spark_home or dest.spark_location).rstrip("/"),
        inputs=list(inputs or []),
    )
    plan.resuming = _check_dest(source, dest)
    for f in ckpt.files:
        if f.kind in _SKIPPED:
            continue
        plan.files.append(f.path)
        plan.bytes += f.entry.size
    homes: set[str] = set()
    for op in ckpt.operators.values():
        for f in op.metadata_v2_files.values():
            text = source.read_bytes(f.path).decode("utf-8")
            found = schema_homes(parse_operator_metadata_v2(f.path, text.encode("utf-8")))
            homes.update(found)
            for home in sorted(h for h in found if not same_location(h, plan.spark_home)):
                count = text.count(f'"{home}/state/')
                plan.rewrites.append(Rewrite(f.path, count, home, plan.spark_home))
    plan.homes = sorted(homes)
    for f in ckpt.of_kind(FileKind.SOURCE_LOG):
        if not plan.inputs:
            break
        text = source.read_bytes(f.path).decode("utf-8", "replace")
        for old, new in plan.inputs:
            count = text.count(f'"path":"{old}')
            if count:
                plan.rewrites.append(Rewrite(f.path, count, old, new))
    if plan.inputs and not any(r.path.startswith("sources/") for r in plan.rewrites):
        plan.warnings.append(
            "no input file of the source logs starts with "
            + " or ".join(old for old, _ in plan.inputs)
            + ": nothing of --input applies"
        )
    elif not plan.inputs and ckpt.of_kind(FileKind.SOURCE_LOG):
        plan.notes.append(
            "the file source's input files stay named as recorded; if the input moved too, "
            "give --input OLD=NEW, or the query reads every input file again"
        )
    if not source.is_local or not dest.is_local:
        plan.notes.append(
            f"Spark will find the schema files under {plan.spark_home}: give "
            "--spark-location if the query names its checkpoint location otherwise"
        )
    return plan


def _check_dest(source: Storage, dest: Storage) -> bool:
    """Whether ``dest`` holds an earlier run of this copy; refused when it holds anything
    else."""
    if dest.root == source.root and dest.is_local == source.is_local:
        raise RelocateRefused(f"{dest.url}: the new home is the checkpoint itself")
    if source.is_local and dest.is_local and dest.root.startswith(source.root.rstrip("/") + "/"):
        raise RelocateRefused(f"{dest.url}: the new home is inside the checkpoint")
    try:
        listed = [e.path for e in dest.list_all()]  # a listing, not a HEAD per file
    except CheckpointNotFound:
        return False
    # An atomic write a dying run left (``.<name>.<uuid>.tmp``) is not a file of anyone's.
    entries = [p for p in listed if parse_temp_name(p.rpartition("/")[2]) is None]
    if not entries:
        return bool(listed)
    if MARKER in entries:
        marker = json.loads(dest.read_bytes(MARKER))
        if marker.get("source") == source.url:
            return True
        raise RelocateRefused(
            f"{dest.url}: holds an unfinished copy of {marker.get('source')}, not of {source.url}",
            hint="remove it, or give another new home",
        )
    shown = ", ".join(sorted(entries)[:3])
    raise RelocateRefused(
        f"{dest.url}: the new home is not empty ({len(entries)} files: {shown}"
        f"{', ...' if len(entries) > 3 else ''})",
        hint="give a new home that does not exist or is empty",
    )
