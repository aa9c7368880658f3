"""Carrying a repartition plan out: the files Spark 4.3's ``OfflineStateRepartitionRunner``
writes, plus the operator metadata's new partition count, each atomically and recorded first
in a write-ahead manifest (:class:`ckpt_cli.change.manifest.Manifest`) so ``--undo`` restores
every byte.

Order (Spark's own, with the metadata before the commit):

1. ``offsets/N+1``: a copy of ``offsets/N`` with only ``spark.sql.shuffle.partitions``
   changed. From here on the batch is a repartition batch: Spark 4.2+ refuses to start the
   query until it is committed (``STREAMING_UNFINISHED_REPARTITION_DETECTED``), so no normal
   batch N+1 can run and write version N+2 of the old layout, and nothing Spark does reads the
   new files before the commit. Writing state first would be wrong: ``N+2.snapshot`` or
   ``N+2.zip`` is what a normal batch N+1 writes next, and a restart would mix them.
2. every new partition's version N+2 (``N+2.snapshot``; ``N+2.zip`` after its SSTs, so no
   zip ever names a missing file), each file before its checksum sidecar;
3. the operator metadata (``_metadata/metadata`` rewritten, ``_metadata/v2/<N+1>`` new);
4. ``commits/N+1`` last: the repartition is done when it exists.

A kill before 1 leaves the checkpoint untouched; between 1 and 4 an unfinished repartition
that ``ckpt repartition`` with the same count finishes and ``--undo`` (or ``ckpt repair``)
rolls back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ckpt_cli.change.batch import BatchChangeResult, BatchWriter, write_batch
from ckpt_cli.change.flow import Guards
from ckpt_cli.change.lock import checkpoint_lock
from ckpt_cli.change.manifest import Manifest, check_quarantine, fresh_quarantine, quarantine_home
from ckpt_cli.change.safety import check_stopped
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.errors import CkptError
from ckpt_cli.formats.logs import SHUFFLE_PARTITIONS
from ckpt_cli.progress import ProgressSink
from ckpt_cli.repartition.logs import operator_metadata_files
from ckpt_cli.repartition.placement import staged_pieces
from ckpt_cli.repartition.plan import (
    RepartitionPlan,
    StorePlan,
    plan_repartition,
    store_dir,
)
from ckpt_cli.repartition.tasks import Built, build_files, staged_file
from ckpt_cli.repartition.writers import store_files

if TYPE_CHECKING:
    from ckpt_cli.engine import Engine

REPARTITION_PREFIX = "repartition-"


@dataclass(frozen=True, kw_only=True)
class RepartitionResult(BatchChangeResult):
    """What :func:`repartition` wrote and replaced, what is left over, and the validation
    after."""

    DETAILS = "rewritten left_over"

    rewritten: list[str]
    left_over: list[str]


def default_quarantine(ckpt: Checkpoint, now: float) -> str:
    return fresh_quarantine(ckpt.storage, REPARTITION_PREFIX, now)


def staged_plan(
    ckpt: Checkpoint, partitions: int, where: str, engine: Engine | None, progress: ProgressSink
) -> RepartitionPlan:
    """The plan with its records staged to apply it in quarantine ``where`` (on a distributed
    engine, in ``<where>/staging``)."""
    check_quarantine(ckpt.storage, where)  # before anything is staged there
    try:
        return plan_repartition(
            ckpt,
            partitions=partitions,
            stage=True,
            engine=engine,
            staging=f"{where.rstrip('/')}/staging",
            progress=progress,
        )
    except BaseException:
        drop_if_unused(ckpt, where)
        raise


def drop_if_unused(ckpt: Checkpoint, where: str) -> None:
    """Remove quarantine ``where`` when nothing is in it (declined, refused, or failed before
    its manifest, the staging removed): there is nothing to undo from it. Then the folder of
    the default quarantines beside the checkpoint too, when that is empty."""
    storage = ckpt.storage
    if storage.remove_empty_dir(where):
        parent = where.rstrip("/").rpartition("/")[0]
        if parent == quarantine_home(storage):
            storage.remove_empty_dir(parent)


def repartition(
    ckpt: Checkpoint,
    plan: RepartitionPlan,
    guards: Guards,
    *,
    quarantine: str | None = None,
    engine: Engine | None = None,
) -> RepartitionResult:
    """Write ``plan`` into ``ckpt`` under the checkpoint lock. Refused while the query looks
    active (newest offsets entry younger than ``guards.min_age``) unless ``guards.force``.
    ``engine``: where the new partitions' files are built (a plan staged by a distributed
    engine needs it)."""
    now = time.time()
    check_stopped(ckpt, min_age=guards.min_age, now=now, force=guards.force)
    where = quarantine or default_quarantine(ckpt, now)
    progress = guards.progress
    with checkpoint_lock(ckpt.storage, "ckpt repartition", break_lock=guards.break_lock):
        ready = plan.staged or plan.staging is not None
        staged = plan if ready else _restaged(ckpt, plan, where, engine, progress)
        try:
            if staged.staging is not None and engine is None:
                raise CkptError("a plan staged by a distributed engine is applied on it: engine=")
            return _apply(ckpt, staged, where, now, engine, progress)
        finally:
            staged.discard()
            drop_if_unused(ckpt, where)


def _restaged(
    ckpt: Checkpoint,
    plan: RepartitionPlan,
    where: str,
    engine: Engine | None,
    progress: ProgressSink,
) -> RepartitionPlan:
    fresh = staged_plan(ckpt, plan.partitions, where, engine, progress)
    if fresh.last_committed != plan.last_committed:
        fresh.discard()
        raise CkptError(
            f"{ckpt.storage.url}: the checkpoint changed since the plan (last committed batch "
            f"{fresh.last_committed}, planned from {plan.last_committed}); plan again"
        )
    return fresh


def _apply(
    ckpt: Checkpoint,
    plan: RepartitionPlan,
    where: str,
    now: float,
    engine: Engine | None,
    progress: ProgressSink,
) -> RepartitionResult:
    manifest = Manifest(ckpt.storage, where, now, lambda: {"repartition": plan.body_json()})
    manifest.save()
    out = BatchWriter(ckpt, manifest)
    built: dict[tuple[int, int], Built] = {}
    if plan.staging is not None:
        assert engine is not None
        # Built (outside the checkpoint) before anything in it changes.
        built = build_files(ckpt, plan, engine, progress)

    def state(out: BatchWriter) -> dict[int, list[list[str]]]:
        unique_ids: dict[int, list[list[str]]] = {}
        progress.start("Writing partitions", total=len(plan.stores) * plan.partitions)
        try:
            for index, store_plan in enumerate(plan.stores):
                if built:
                    ids = _move_store(ckpt, plan, index, built, out, progress)
                else:
                    ids = _write_store(ckpt, plan, store_plan, out, progress)
                if ids is not None:
                    rows = unique_ids.setdefault(store_plan.operator, [[] for _ in ids])
                    for row, uid in zip(rows, ids, strict=True):
                        row.append(uid)
        finally:
            progress.close()
        return unique_ids

    write_batch(
        out,
        last=plan.last_committed,
        state=state,
        confs={SHUFFLE_PARTITIONS: str(plan.partitions)},
        metadata=lambda: operator_metadata_files(ckpt, plan),
        offsets_written=plan.finishing is not None,
    )
    notes = []
    if plan.left_over:
        notes.append(
            f"left over: {len(plan.left_over)} partition directories the query no longer uses "
            f"({', '.join(plan.left_over)}); `ckpt cleanup` removes them once no retained batch "
            "before the repartition needs them"
        )
    return RepartitionResult.finish(
        manifest, out, notes, rewritten=out.rewritten, left_over=plan.left_over
    )


def _write_store(
    ckpt: Checkpoint,
    plan: RepartitionPlan,
    store_plan: StorePlan,
    out: BatchWriter,
    progress: ProgressSink,
) -> list[str] | None:
    """Version N+2 of every new partition of one store; the uniqueIds (format v2) or None."""
    op = ckpt.operators[store_plan.operator]
    ids: list[str] = []
    for p in range(plan.partitions):
        base = store_dir(op, p, store_plan.store)
        # One new partition at a time, streamed from its staged records.
        with (
            open(plan.staged[(op.id, store_plan.store, p)], "rb") as staged,
            store_files(ckpt, plan, store_plan, staged_pieces(staged.read)) as files,
        ):
            for name, local in files.files:
                out.upload(f"{base}/{name}", local)
        if files.unique_id is not None:
            ids.append(files.unique_id)
        progress.advance()
    return ids if ids else None


def _move_store(
    ckpt: Checkpoint,
    plan: RepartitionPlan,
    index: int,
    built: dict[tuple[int, int], Built],
    out: BatchWriter,
    progress: ProgressSink,
) -> list[str] | None:
    """:func:`_write_store` for files built by tasks: moved in, in the same order."""
    assert plan.staging is not None
    store_plan = plan.stores[index]
    op = ckpt.operators[store_plan.operator]
    ids: list[str] = []
    for p in range(plan.partitions):
        files, unique_id = built[(index, p)]
        base = store_dir(op, p, store_plan.store)
        for name, size in files:
            location = staged_file(plan, index, p, name)
            out.move_in(f"{base}/{name}", location, size, within=plan.staging.root)
        if unique_id is not None:
            ids.append(unique_id)
        progress.advance()
    return ids if ids else None
