"""Planning ``ckpt repartition``: the last committed batch N, the repartition batch N+1, the
state version N+2 every new partition gets, and where every key of the state at batch N
goes.

The state is read through replay's path (``plan_version`` + ``iter_state``: the raw records
of every column family, join store and transformWithState family), each record placed by
:mod:`ckpt_cli.state.partition_keys` (Spark's shuffle: Murmur3 of the operator's
partitioning key, ``pmod`` the new count). The plan counts keys and bytes per new partition
and the skew (largest over median partition) before and after; with ``stage`` it also keeps
the records, grouped by new partition in temporary files, for
:func:`ckpt_cli.repartition.apply.repartition`. Refusals raise :class:`RepartitionRefused`
(one line; the CLI exits 2)."""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from ckpt_cli.change.batch import NewBatch
from ckpt_cli.change.safety import last_committed_batch, links_refused
from ckpt_cli.core.model import DEFAULT_STORE, Checkpoint, CheckpointFile, FileKind, Operator, Store
from ckpt_cli.core.read import read_zip_metadata
from ckpt_cli.core.rebuild import ReplayPlan, plan_version
from ckpt_cli.core.unfinished import UnfinishedRepartition, find_unfinished_repartition
from ckpt_cli.errors import CkptError
from ckpt_cli.formats.rocksdb_zip import RocksDBCheckpointMetadata
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.repartition.logs import operator_metadata_files
from ckpt_cli.repartition.placement import Placed, UnsupportedOperator, place_partition
from ckpt_cli.results import Result, fields_json
from ckpt_cli.storage import Storage
from ckpt_cli.units import natural_key

if TYPE_CHECKING:
    from ckpt_cli.engine import Engine


class RepartitionRefused(CkptError, code="REPARTITION_REFUSED"):
    """``ckpt repartition`` will not run on this checkpoint (the message says why)."""


def skew(values: list[int]) -> float | None:
    """Largest over median (1.0 is even); None when the median is 0."""
    if not values:
        return None
    median = statistics.median(values)
    return round(max(values) / median, 3) if median else None


@dataclass
class StorePlan:
    """One store of one operator: keys and record bytes (key + value) per partition before
    (old partitions) and after (new partitions), and the files the new partitions get."""

    operator: int
    store: str
    provider: str
    keys_before: list[int]
    bytes_before: list[int]
    keys_after: list[int]
    bytes_after: list[int]
    files: list[str] = field(default_factory=list)  # to write (names; sizes once written)
    left_over: list[str] = field(default_factory=list)  # old partition directories
    # RocksDB: the metadata of the newest zip read (its column families carry over).
    template: RocksDBCheckpointMetadata | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        return fields_json(
            self,
            "operator store provider keys keys_before bytes_before keys_after bytes_after"
            " skew_before skew_after files_to_write=files left_over",
            keys=sum(self.keys_before),
            skew_before=skew(self.keys_before),
            skew_after=skew(self.keys_after),
        )


@dataclass
class RepartitionPlan(NewBatch, Result):
    """What ``ckpt repartition`` writes: batch ``batch`` (= last committed + 1) repartitions
    the state from ``from_partitions`` to ``partitions``; every new partition gets state
    version ``version``. ``finishing``: an unfinished repartition to the same count that this
    one completes. ``staged``: the records per (operator, store, new partition) in temporary
    files (with ``stage=True``; removed by :meth:`discard`)."""

    checkpoint: str
    last_committed: int
    from_partitions: int
    partitions: int
    provider: str
    checkpoint_format_version: int
    stores: list[StorePlan] = field(default_factory=list)
    log_files: list[str] = field(default_factory=list)  # offsets/commits/metadata written
    finishing: UnfinishedRepartition | None = None
    notes: list[str] = field(default_factory=list)
    # What applying would refuse, said instead (a dry run never refuses), and signals of the
    # query's activity that disagree (a copy or restore).
    warnings: list[str] = field(default_factory=list)
    staged: dict[tuple[int, str, int], Path] = field(default_factory=dict, repr=False)
    # engine=spark: the records and built files staged on the checkpoint's own filesystem.
    staging: Storage | None = field(default=None, repr=False)
    _stage_dir: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)

    @property
    def left_over(self) -> list[str]:
        return sorted({d for s in self.stores for d in s.left_over}, key=natural_key)

    def body_json(self) -> dict[str, Any]:
        return fields_json(
            self,
            "checkpoint last_committed batch version from_partitions partitions provider"
            " checkpoint_format_version stores log_files left_over finishing notes warnings",
        )

    def discard(self) -> None:
        """Remove the staged records."""
        self.staged.clear()
        if self.staging is not None:
            self.staging.delete_tree(within=self.staging.root.rpartition("/")[0])
            self.staging = None
        if self._stage_dir is not None:
            self._stage_dir.cleanup()
            self._stage_dir = None


# -- planning ----------------------------------------------------------------------------------


def store_dir(op: Operator, partition: int, store: str) -> str:
    base = f"{op.path}/{partition}"
    return base if store == DEFAULT_STORE else f"{base}/{store}"


def _refuse_on_logs(
    ckpt: Checkpoint, partitions: int
) -> tuple[int, int, UnfinishedRepartition | None]:
    """The last committed batch and its partition count, or the refusal."""
    url = ckpt.storage.url
    if partitions < 1:
        raise RepartitionRefused(f"partitions={partitions}: the partition count must be >= 1")
    last, latest = last_committed_batch(ckpt, RepartitionRefused, "repartition")
    unfinished = find_unfinished_repartition(ckpt)
    if unfinished is not None:
        if unfinished.to_partitions != partitions or unfinished.batch != last + 1:
            raise RepartitionRefused(f"{url}: {unfinished.describe()}", hint=unfinished.hint)
    elif latest is not None and latest > last:
        raise RepartitionRefused(
            f"{url}: the last batch ({latest}) is not committed: Spark re-runs it at restart, "
            "and a repartition would skip its input",
            hint="restart the query until the batch commits, or roll it back with "
            f"ckpt repair --rollback-to {last}",
        )
    current = ckpt.offsets(last).shuffle_partitions
    if current is None:
        raise RepartitionRefused(
            f"offsets/{last}: no spark.sql.shuffle.partitions in its conf: cannot tell the "
            "current partition count"
        )
    if current == partitions:
        raise RepartitionRefused(
            f"{url}: the query already has {partitions} partitions (offsets/{last})"
        )
    if not ckpt.operators:
        raise RepartitionRefused(f"{url}: the query keeps no state: nothing to repartition")
    return last, current, unfinished


def plan_repartition(
    ckpt: Checkpoint,
    *,
    partitions: int,
    stage: bool = False,
    engine: Engine | None = None,
    staging: str | None = None,
    progress: ProgressSink = NULL_PROGRESS,
) -> RepartitionPlan:
    """Plan the repartition of ``ckpt``'s state to ``partitions``; nothing is written to the
    checkpoint. ``stage``: keep the records for :func:`~ckpt_cli.repartition.apply.repartition`
    (until ``plan.discard()``): in local temporary files, or with a distributed ``engine``
    (Spark) in ``staging``, a directory outside the checkpoint on its filesystem (see
    :mod:`ckpt_cli.repartition.tasks`)."""
    links = links_refused(ckpt)
    if links:  # checked first: the logs and state are read, and written, only without links
        raise RepartitionRefused(f"{ckpt.storage.url}: not repartitioning: {links[0]}")
    last, current, unfinished = _refuse_on_logs(ckpt, partitions)
    providers = sorted({st.provider for op in ckpt.operators.values() for st in op.stores.values()})
    plan = RepartitionPlan(
        checkpoint=ckpt.storage.url,
        last_committed=last,
        from_partitions=current,
        partitions=partitions,
        provider=providers[0] if len(providers) == 1 else "+".join(providers),
        checkpoint_format_version=ckpt.checkpoint_format_version,
        finishing=unfinished,
    )
    for provider in providers:
        if provider not in ("hdfs", "rocksdb"):
            raise RepartitionRefused(
                f"{ckpt.storage.url}: a store's provider is {provider!r}: ckpt repartitions "
                "HDFS-backed and RocksDB stores only"
            )
    distributed = engine is not None and engine.name != "local"
    if stage and distributed:
        if staging is None:
            raise ValueError("a distributed engine stages the records in staging=")
        plan.staging = ckpt.storage.elsewhere(staging)
    elif stage:
        plan._stage_dir = tempfile.TemporaryDirectory(prefix="ckpt-repartition-")
    stores = [(op, store) for op in ckpt.operators.values() for store in op.stores.values()]
    try:
        if distributed:
            assert engine is not None
            from ckpt_cli.repartition.tasks import place_stores  # it builds on this module

            place_stores(ckpt, plan, stores, engine, progress)
        else:
            for op, store in stores:
                plan.stores.append(_plan_store(ckpt, plan, op, store, progress))
    except BaseException:
        plan.discard()
        raise
    plan.log_files = [
        f"offsets/{plan.batch}",
        *operator_metadata_files(ckpt, plan),
        f"commits/{plan.batch}",
    ]
    if unfinished is not None:
        plan.notes.append(
            f"finishing the unfinished repartition of batch {unfinished.batch} (to "
            f"{partitions} partitions): its state files are written again"
        )
    if plan.left_over:
        plan.notes.append(
            f"partitions {partitions}-{current - 1} are no longer used: their directories "
            "stay until `ckpt cleanup` removes them (once no retained batch before the "
            "repartition needs them)"
        )
    return plan


def unreadable(
    last_committed: int, op: Operator, store: Store, old: int, exc: CkptError
) -> RepartitionRefused:
    return RepartitionRefused(
        f"{store_dir(op, old, store.name)}: the state of batch {last_committed} "
        f"(version {last_committed + 1}) cannot be read completely: {exc.message}",
        hint=exc.hint or "ckpt validate shows every finding",
    )


def _version_plan(
    ckpt: Checkpoint, plan: RepartitionPlan, op: Operator, store: Store, old: int, out: StorePlan
) -> ReplayPlan:
    if old not in store.partitions:
        raise RepartitionRefused(
            f"{store_dir(op, old, store.name)}: missing: the state of batch "
            f"{plan.last_committed} cannot be read completely"
        )
    try:
        version_plan = plan_version(ckpt, op.id, old, plan.last_committed + 1, store=store.name)
        _check_template(ckpt, out, version_plan.base)
    except RepartitionRefused:
        raise
    except CkptError as exc:
        raise unreadable(plan.last_committed, op, store, old, exc) from exc
    return version_plan


def _check_template(ckpt: Checkpoint, out: StorePlan, base: CheckpointFile | None) -> None:
    """Every old partition's zip must name the same virtual column families: the records
    keep their 2-byte family ids as they move."""
    if base is None or base.kind is not FileKind.ZIP:
        return
    meta = read_zip_metadata(ckpt.storage, base.path, base.entry.size)
    if out.template is None:
        out.template = meta
    elif meta.column_family_mapping != out.template.column_family_mapping:
        raise RepartitionRefused(
            f"{base.path}: its column family ids differ from the other partitions' "
            f"({meta.column_family_mapping} vs {out.template.column_family_mapping}); "
            "moving records between them is not supported yet"
        )


def add_placed(out: StorePlan, old: int, placed: Placed) -> None:
    out.keys_before[old] += placed.keys
    out.bytes_before[old] += placed.bytes
    for new, (keys, size) in enumerate(zip(placed.keys_after, placed.bytes_after, strict=True)):
        out.keys_after[new] += keys
        out.bytes_after[new] += size


def store_reads(
    ckpt: Checkpoint, plan: RepartitionPlan, op: Operator, store: Store
) -> tuple[StorePlan, list[ReplayPlan]]:
    """The empty plan of one store and what to read of each old partition (driver side)."""
    m, n = plan.partitions, plan.from_partitions
    out = StorePlan(op.id, store.name, store.provider, [0] * n, [0] * n, [0] * m, [0] * m)
    return out, [_version_plan(ckpt, plan, op, store, old, out) for old in range(n)]


def _plan_store(
    ckpt: Checkpoint, plan: RepartitionPlan, op: Operator, store: Store, progress: ProgressSink
) -> StorePlan:
    m = plan.partitions
    out, version_plans = store_reads(ckpt, plan, op, store)
    writers: list[BinaryIO] = []
    if plan._stage_dir is not None:
        for p in range(m):
            path = Path(plan._stage_dir.name) / f"{op.id}-{len(plan.stores)}-{p}"
            plan.staged[(op.id, store.name, p)] = path
            writers.append(open(path, "wb"))  # noqa: SIM115 (closed below)
    try:
        for old, version_plan in enumerate(version_plans):
            try:
                placed = place_partition(
                    ckpt, store, version_plan, m, out.template, writers, progress
                )
            except (RepartitionRefused, UnsupportedOperator):
                raise
            except CkptError as exc:
                raise unreadable(plan.last_committed, op, store, old, exc) from exc
            add_placed(out, old, placed)
    finally:
        for w in writers:
            w.close()
    finish_store(plan, op, store, out)
    return out


def finish_store(plan: RepartitionPlan, op: Operator, store: Store, out: StorePlan) -> None:
    """The files every new partition gets, and the old directories left over."""
    m = plan.partitions
    version = plan.version
    for p in range(m):
        where = store_dir(op, p, store.name)
        if store.provider == "hdfs":
            out.files.append(f"{where}/{version}.snapshot")
        elif plan.checkpoint_format_version >= 2:
            out.files.append(f"{where}/{version}_<uniqueId>.zip")
        else:
            out.files.append(f"{where}/{version}.zip")
    out.left_over = sorted(
        {store_dir(op, p, DEFAULT_STORE) for p in store.partitions if p >= m}, key=natural_key
    )
