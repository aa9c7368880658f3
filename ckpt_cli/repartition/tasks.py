"""``ckpt repartition`` on an engine (``--engine spark``) for states larger than one machine:
the state is read, placed and written as tasks, its bytes staying on the checkpoint's own
filesystem; only counts, names and sizes travel to the driver.

1. one task per (store, old partition) reads its state at batch N and places every record
   (:func:`~ckpt_cli.repartition.placement.place_partition`, as on the driver), writing the
   records of each new partition to ``<staging>/records/<store>/<new>/<old>``;
2. one task per (store, new partition) joins its records in old-partition order (the very
   bytes the local engine stages) and builds its files
   (:func:`~ckpt_cli.repartition.writers.store_files`) into ``<staging>/files/<store>/<new>/``;
3. the driver moves them into place in :mod:`~ckpt_cli.repartition.apply`'s order, under its
   manifest, so crash safety and ``--undo`` are the local engine's.

The staging directory is in the repartition's quarantine (``<root>.ckpt-quarantine/
repartition-<stamp>/staging``), never in the checkpoint: Spark never sees it, and it is
removed at the end (``plan.discard()``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from ckpt_cli.core.model import Checkpoint, Operator, Store
from ckpt_cli.core.rebuild import ReplayPlan
from ckpt_cli.core.shipped import ShippedCheckpoint
from ckpt_cli.errors import CkptError
from ckpt_cli.formats.rocksdb_zip import RocksDBCheckpointMetadata
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.repartition.placement import (
    Placed,
    UnsupportedOperator,
    place_partition,
    staged_pieces,
)
from ckpt_cli.repartition.plan import (
    RepartitionPlan,
    RepartitionRefused,
    add_placed,
    finish_store,
    store_reads,
    unreadable,
)
from ckpt_cli.repartition.writers import store_files
from ckpt_cli.storage import Storage

if TYPE_CHECKING:
    from ckpt_cli.engine import Engine

U = TypeVar("U")
R = TypeVar("R")
# (name in the store's directory, size) of one new partition's files, and its uniqueId.
Built = tuple[list[tuple[str, int]], str | None]


def _records(index: int, new: int, old: int) -> str:
    return f"records/{index}/{new}/{old}"


def _files(index: int, new: int) -> str:
    return f"files/{index}/{new}"


@dataclass(frozen=True)
class _Shared:
    """What every task gets once: the checkpoint (storage and listing), the staging
    directory, and (to build files) the plan."""

    checkpoint: ShippedCheckpoint
    staging: Storage | None
    plan: RepartitionPlan | None = None


_SHARED: tuple[_Shared, Checkpoint] | None = None


def _init(shared: _Shared) -> None:
    global _SHARED
    _SHARED = shared, shared.checkpoint.open()


@dataclass(frozen=True)
class _ReadUnit:
    index: int  # the store's position in plan.stores
    store: str
    old: int
    version_plan: ReplayPlan
    template: RocksDBCheckpointMetadata | None
    partitions: int
    last_committed: int


def _read_unit(unit: _ReadUnit) -> Placed:
    """In a task: place one old partition's records, staged per new partition."""
    assert _SHARED is not None
    shared, ckpt = _SHARED
    op = ckpt.operators[unit.version_plan.operator]
    store = op.stores[unit.store]
    with ExitStack() as stack:
        sinks = None
        if shared.staging is not None:
            sinks = [
                stack.enter_context(shared.staging.open_write(_records(unit.index, new, unit.old)))
                for new in range(unit.partitions)
            ]
        try:
            return place_partition(
                ckpt, store, unit.version_plan, unit.partitions, unit.template, sinks
            )
        except (RepartitionRefused, UnsupportedOperator):
            raise
        except CkptError as exc:
            raise unreadable(unit.last_committed, op, store, unit.old, exc) from exc


def place_stores(
    ckpt: Checkpoint,
    plan: RepartitionPlan,
    stores: list[tuple[Operator, Store]],
    engine: Engine,
    progress: ProgressSink = NULL_PROGRESS,
) -> None:
    """Plan ``stores`` (into ``plan.stores``) with one task per (store, old partition);
    with ``plan.staging``, the tasks stage the records there."""
    units = []
    for op, store in stores:
        out, version_plans = store_reads(ckpt, plan, op, store)
        index = len(plan.stores)
        plan.stores.append(out)
        units += [
            _ReadUnit(
                index, store.name, old, vp, out.template, plan.partitions, plan.last_committed
            )
            for old, vp in enumerate(version_plans)
        ]
    shared = _Shared(ShippedCheckpoint.of(ckpt), plan.staging)
    placed = engine.tasks("Reading partitions", _read_unit, units, partial(_init, shared), progress)
    for unit, counts in zip(units, placed, strict=True):
        add_placed(plan.stores[unit.index], unit.old, counts)
    for (op, store), out in zip(stores, plan.stores, strict=True):
        finish_store(plan, op, store, out)


@dataclass(frozen=True)
class _WriteUnit:
    index: int
    new: int


def _write_unit(unit: _WriteUnit) -> Built:
    """In a task: one new partition's files, from its staged records, into the staging."""
    assert _SHARED is not None
    shared, ckpt = _SHARED
    plan, staging = shared.plan, shared.staging
    assert plan is not None and staging is not None
    rels = [_records(unit.index, unit.new, old) for old in range(plan.from_partitions)]
    with store_files(ckpt, plan, plan.stores[unit.index], _pieces(staging, rels)) as built:
        for name, local in built.files:
            staging.write_file(f"{_files(unit.index, unit.new)}/{name}", str(local))
        return [(name, local.stat().st_size) for name, local in built.files], built.unique_id


def _pieces(staging: Storage, rels: list[str]) -> Iterator[bytes]:
    """The staged files' bytes in order, streamed."""
    for rel in rels:
        with staging.open_stream(rel) as stream:
            yield from staged_pieces(stream.read)


def build_files(
    ckpt: Checkpoint, plan: RepartitionPlan, engine: Engine, progress: ProgressSink
) -> dict[tuple[int, int], Built]:
    """Every new partition's files, built by one task each into the staging; by (store's
    position in ``plan.stores``, new partition)."""
    assert plan.staging is not None
    units = [_WriteUnit(i, p) for i in range(len(plan.stores)) for p in range(plan.partitions)]
    shared = _Shared(ShippedCheckpoint.of(ckpt), plan.staging, plan)
    built = engine.tasks(
        "Building partitions", _write_unit, units, partial(_init, shared), progress
    )
    return {(u.index, u.new): b for u, b in zip(units, built, strict=True)}


def staged_file(plan: RepartitionPlan, index: int, new: int, name: str) -> str:
    """Where the task put a built file (a path on the checkpoint's filesystem)."""
    assert plan.staging is not None
    return plan.staging.full_path(f"{_files(index, new)}/{name}")
