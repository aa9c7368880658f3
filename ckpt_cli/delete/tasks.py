"""``ckpt state delete`` on a distributed engine (``--engine spark``), for states larger than
one machine: a deletion moves no record between partitions, so each store partition is
matched, and its version N+2 written, by a task of its own; only the matched keys and rows,
names and sizes travel to the driver.

* planning: one task per partition runs :class:`~ckpt_cli.delete.matching.Matcher` (built
  once per process from the plain :class:`~ckpt_cli.delete.matching.MatchSpec`);
* applying: one task per store partition writes version N+2's files
  (:func:`~ckpt_cli.change.state_version.write_unit`, as the driver does on one machine)
  into ``<quarantine>/staging/<n>/``; the driver then moves them in, in the same order,
  under its manifest, so kill safety and ``--undo`` are the same. The staging directory is
  never in the checkpoint, and is removed at the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from ckpt_cli.change.state_version import VersionUnit, write_unit
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.core.shipped import ShippedCheckpoint
from ckpt_cli.delete.matching import Matcher, MatchSpec
from ckpt_cli.delete.selection import PartitionMatch
from ckpt_cli.formats.checksums import hadoop_crc_bytes
from ckpt_cli.formats.names import hadoop_crc_name
from ckpt_cli.progress import ProgressSink
from ckpt_cli.storage import Storage

if TYPE_CHECKING:
    from ckpt_cli.engine import Engine

# (path in the checkpoint, size) of a unit's files in write order, and its uniqueId.
Staged = tuple[list[tuple[str, int]], str | None]


@dataclass(frozen=True)
class _Shared:
    checkpoint: ShippedCheckpoint
    spec: MatchSpec
    staging: Storage | None = None


_TASK: tuple[_Shared, Checkpoint, Matcher | None] | None = None


def _init(shared: _Shared, matching: bool) -> None:
    global _TASK
    ckpt = shared.checkpoint.open()
    _TASK = shared, ckpt, Matcher(ckpt, shared.spec) if matching else None


def _match_unit(unit: tuple[int, int | None]) -> PartitionMatch:
    """In a task: one partition's matched keys (and the first ``keep`` rows: None, all)."""
    assert _TASK is not None and _TASK[2] is not None
    partition, keep = unit
    return _TASK[2].match(partition, keep=keep)


class _StagingWriter:
    """A unit's files into the staging area, by their path in the checkpoint (with
    Hadoop's checksum beside each when the checkpoint is on local disk, as
    ``BatchWriter.write`` writes them), in write order."""

    def __init__(self, staging: Storage, prefix: str, local: bool) -> None:
        self.staging, self.prefix, self.local = staging, prefix, local
        self.files: list[tuple[str, int]] = []

    def write(self, rel: str, data: bytes, *, sidecar: bool = True) -> None:
        files = [(rel, data)]
        if sidecar and self.local:
            files.append((hadoop_crc_name(rel), hadoop_crc_bytes(data)))
        for path, body in files:
            self.staging.write_bytes(f"{self.prefix}/{path}", body)
            self.files.append((path, len(body)))


def staged_prefix(index: int) -> str:
    return str(index)


def _write_unit(item: tuple[int, VersionUnit]) -> Staged:
    """In a task: one store partition's version N+2, written into the staging."""
    assert _TASK is not None
    shared, ckpt, _ = _TASK
    assert shared.staging is not None
    index, unit = item
    out = _StagingWriter(shared.staging, staged_prefix(index), ckpt.storage.is_local)
    unique_id = write_unit(ckpt, out, shared.spec.last, unit)
    return out.files, unique_id


def match_partitions(
    ckpt: Checkpoint,
    spec: MatchSpec,
    partitions: list[int],
    keep: int | None,
    engine: Engine,
    progress: ProgressSink,
) -> list[PartitionMatch]:
    """Every partition's matched keys, one task each, with the first ``keep`` rows of each
    (None: all of them)."""
    shared = _Shared(ShippedCheckpoint.of(ckpt), spec)
    setup = partial(_init, shared, True)
    units = [(partition, keep) for partition in partitions]
    return engine.tasks("Matching keys", _match_unit, units, setup, progress)


def stage_versions(
    ckpt: Checkpoint,
    spec: MatchSpec,
    units: list[VersionUnit],
    staging: Storage,
    engine: Engine,
    progress: ProgressSink,
) -> list[Staged]:
    """Every unit's files of version N+2, written by one task each into ``staging``."""
    shared = _Shared(ShippedCheckpoint.of(ckpt), spec, staging)
    setup = partial(_init, shared, False)
    return engine.tasks("Writing partitions", _write_unit, list(enumerate(units)), setup, progress)


__all__ = ["Staged", "match_partitions", "stage_versions", "staged_prefix"]
