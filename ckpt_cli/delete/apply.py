"""Carrying a deletion out as batch N+1 (``change.batch.write_batch``: ``offsets/N+1`` a
copy of ``offsets/N``, every partition's version N+2, ``commits/N+1`` last), each file
recorded first in the write-ahead manifest so that ``--undo`` restores every byte.

Every store partition of every operator gets version N+2, the ones without a matched key
too (Spark loads version N+2 of each): ``change.state_version`` writes it as Spark writes a
batch that removed those keys.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ckpt_cli.change.batch import BatchChangeResult, BatchWriter, write_batch
from ckpt_cli.change.manifest import Manifest
from ckpt_cli.change.state_version import (
    VersionUnit,
    unique_ids_of,
    version_units,
    write_state_version,
)
from ckpt_cli.core.layout import StoreLocation
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.delete.matching import MatchSpec
from ckpt_cli.delete.plan import DeletePlan
from ckpt_cli.delete.tasks import Staged, stage_versions, staged_prefix
from ckpt_cli.engine import Engine
from ckpt_cli.progress import ProgressSink
from ckpt_cli.storage import Storage

DELETE_PREFIX = "delete-"


@dataclass(frozen=True, kw_only=True)
class DeleteResult(BatchChangeResult):
    """What :func:`apply_plan` wrote (``removed``: keys), and the validation after."""

    DETAILS = "removed"

    removed: int


def apply_plan(
    ckpt: Checkpoint,
    plan: DeletePlan,
    quarantine: str,
    progress: ProgressSink,
    engine: Engine | None = None,
) -> DeleteResult:
    """Write ``plan`` into ``ckpt`` (under the caller's lock, after its checks of the
    query's activity), its manifest in ``quarantine``. ``engine``: a distributed one writes
    the partitions' files as tasks, staged in ``<quarantine>/staging``."""
    manifest = Manifest(ckpt.storage, quarantine, time.time(), lambda: {"delete": plan.body_json()})
    manifest.save()
    out = BatchWriter(ckpt, manifest)
    removed = {
        StoreLocation(plan.operator, p, store): keys for (store, p), keys in plan.matched.items()
    }
    last = plan.last_committed

    def state(out: BatchWriter) -> dict[int, list[list[str]]]:
        return write_state_version(ckpt, out, last=last, removed=removed, progress=progress)

    if engine is None or engine.name == "local":
        write_batch(out, last=last, state=state)
    else:
        # The tasks write into the staging before the batch is begun: a failing task
        # leaves the checkpoint as it was.
        staging = ckpt.storage.elsewhere(f"{quarantine.rstrip('/')}/staging")
        try:
            units = version_units(ckpt, last, removed)
            spec = MatchSpec(plan.operator, last)
            staged = stage_versions(ckpt, spec, units, staging, engine, progress)
            write_batch(
                out,
                last=last,
                state=lambda out: _moved_in(ckpt, out, units, staged, staging, progress),
            )
        finally:
            staging.delete_tree(within=quarantine)
    removed_keys = sum(p.matched for p in plan.partitions)
    return DeleteResult.finish(manifest, out, list(plan.notes), removed=removed_keys)


def _moved_in(
    ckpt: Checkpoint,
    out: BatchWriter,
    units: list[VersionUnit],
    staged: list[Staged],
    staging: Storage,
    progress: ProgressSink,
) -> dict[int, list[list[str]]]:
    """Version N+2, written by the engine's tasks into ``staging``, moved in unit by unit
    in the order the driver writes it."""
    progress.start("Moving partitions in", total=len(units))
    try:
        for index, (files, _) in enumerate(staged):
            for rel, size in files:
                location = staging.full_path(f"{staged_prefix(index)}/{rel}")
                out.move_in(rel, location, size, within=out.manifest.where)
            progress.advance()
    finally:
        progress.close()
    return unique_ids_of(ckpt, units, [unique_id for _, unique_id in staged])
