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
from ckpt_cli.change.state_version import write_state_version
from ckpt_cli.core.layout import StoreLocation
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.delete.plan import DeletePlan
from ckpt_cli.progress import ProgressSink

DELETE_PREFIX = "delete-"


@dataclass(frozen=True, kw_only=True)
class DeleteResult(BatchChangeResult):
    """What :func:`apply_plan` wrote (``removed``: keys), and the validation after."""

    DETAILS = "removed"

    removed: int


def apply_plan(
    ckpt: Checkpoint, plan: DeletePlan, quarantine: str, progress: ProgressSink
) -> DeleteResult:
    """Write ``plan`` into ``ckpt`` (under the caller's lock, after its checks of the
    query's activity), its manifest in ``quarantine``."""
    manifest = Manifest(ckpt.storage, quarantine, time.time(), lambda: {"delete": plan.body_json()})
    manifest.save()
    out = BatchWriter(ckpt, manifest)

    def state(out: BatchWriter) -> dict[int, list[list[str]]]:
        removed = {
            StoreLocation(plan.operator, p, store): keys
            for (store, p), keys in plan.matched.items()
        }
        return write_state_version(
            ckpt, out, last=plan.last_committed, removed=removed, progress=progress
        )

    write_batch(out, last=plan.last_committed, state=state)
    removed = sum(p.matched for p in plan.partitions)
    return DeleteResult.finish(manifest, out, list(plan.notes), removed=removed)
