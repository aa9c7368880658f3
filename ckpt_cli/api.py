"""The Python API: one method per command on :class:`~ckpt_cli.model.Checkpoint`.

    >>> import ckpt_cli
    >>> ckpt = ckpt_cli.open("s3://bucket/query", {"anon": False})
    >>> ckpt.validate().ok
    >>> ckpt.replay(operator=0).to_pandas()

Each method is the library call its command makes, with the same defaults; the modules named
in each docstring have the rest of the options. Imports are inside the methods because those
modules import the model.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from ckpt_cli.batches import BatchesReport
    from ckpt_cli.cleanup import CleanupPlan
    from ckpt_cli.du import DiskUsageReport
    from ckpt_cli.engine import Engine
    from ckpt_cli.model import Checkpoint
    from ckpt_cli.repair import RepairPlan, UndoResult
    from ckpt_cli.repartition.apply import RepartitionResult
    from ckpt_cli.repartition.plan import RepartitionPlan
    from ckpt_cli.replay import StateRows
    from ckpt_cli.report import HtmlReport
    from ckpt_cli.validate import ValidationReport
    from ckpt_cli.versions import VersionsReport


class CheckpointCalls:
    """What ``ckpt versions``, ``validate``, ``replay``, ``orphans``/``cleanup`` (the plan),
    ``repair`` (the plan), ``repartition`` and their ``--undo`` compute, as methods of a
    checkpoint."""

    @property
    def _checkpoint(self) -> Checkpoint:
        return cast("Checkpoint", self)  # the only class this is mixed into

    def versions(
        self, *, operator: int | None = None, partitions: Sequence[int] | None = None
    ) -> VersionsReport:
        """Batches, operators, stores, partitions and their state store versions."""
        from ckpt_cli.versions import describe_versions

        return describe_versions(self._checkpoint, operator=operator, partitions=partitions)

    def timeline(
        self, *, last: int | None = None, since: int | None = None, until: int | None = None
    ) -> BatchesReport:
        """What ``ckpt batches`` shows (``batches`` is the logs' listing): one row per batch
        (``.batches``) with its planned time, watermark, each source's offsets and whether it
        committed; see :func:`ckpt_cli.batches.batch_timeline`."""
        from ckpt_cli.batches import batch_timeline

        return batch_timeline(self._checkpoint, last=last, since=since, until=until)

    def disk_usage(self, *, top: int = 10, summarize: bool = False) -> DiskUsageReport:
        """What ``ckpt du`` shows: bytes and file counts by class, area, operator, store and
        partition, the ``top`` largest partitions and each store's skew (no state file read)."""
        from ckpt_cli.du import disk_usage

        return disk_usage(self._checkpoint, top=top, summarize=summarize)

    def report(
        self, output: str, *, storage_options: Mapping[str, object] | None = None
    ) -> HtmlReport:
        """What ``ckpt report`` writes: one self-contained HTML page at ``output`` (a path or
        URL, opened with ``storage_options``) with the headline, the validate findings and plots;
        see :mod:`ckpt_cli.report`."""
        from ckpt_cli.report import write_report

        return write_report(self._checkpoint, output, storage_options=storage_options)

    def validate(
        self,
        *,
        batch: int | None = None,
        all_versions: bool = False,
        deep: bool = False,
        fail_on: str = "error",
    ) -> ValidationReport:
        """Whether the query can restart from this checkpoint (``.ok``) and why not
        (``.findings``); see :func:`ckpt_cli.validate.validate`."""
        from dataclasses import replace

        from ckpt_cli.validate import validate

        report = validate(self._checkpoint, batch=batch, all_versions=all_versions, deep=deep)
        return replace(report, fail_on=fail_on)

    def replay(
        self,
        *,
        batch: int | None = None,
        operator: int | None = None,
        store: str | None = None,
        partitions: Iterable[int] | None = None,
        change_start_batch: int | None = None,
        change_end_batch: int | None = None,
        where: Mapping[str, str] | None = None,
        raw: bool = False,
    ) -> StateRows:
        """A store's state after ``batch`` (default: the latest committed), or with
        ``change_start_batch`` its change feed, as Spark's ``statestore`` source gives it:
        iterate the rows, or call ``.to_arrow()`` / ``.to_pandas()``."""
        from ckpt_cli.replay import read_state

        return read_state(
            self._checkpoint,
            batch=batch,
            operator=operator,
            store=store,
            partitions=partitions,
            change_start_batch=change_start_batch,
            change_end_batch=change_end_batch,
            where=where,
            raw=raw,
        )

    def plan_cleanup(
        self, *, retain: int | None = None, min_age: float | None = None
    ) -> CleanupPlan:
        """What ``cleanup`` would delete (``.deletions``) and why, keeping what every retained
        version needs; nothing is deleted (see :func:`ckpt_cli.cleanup.apply_cleanup`)."""
        from ckpt_cli.cleanup import plan_cleanup
        from ckpt_cli.cleanup.safety import DEFAULT_MIN_AGE_SECONDS

        age = DEFAULT_MIN_AGE_SECONDS if min_age is None else min_age
        return plan_cleanup(self._checkpoint, retain=retain, min_age=age)

    def plan_repair(self, *, rollback_to: int | None = None, snapshot: bool = False) -> RepairPlan:
        """What ``repair`` would do to make the checkpoint restartable (``.actions``);
        nothing is changed (see :func:`ckpt_cli.repair.apply_repair`)."""
        from ckpt_cli.repair import plan_repair

        return plan_repair(self._checkpoint, rollback_to=rollback_to, snapshot=snapshot)

    def plan_repartition(self, *, partitions: int, engine: Engine | None = None) -> RepartitionPlan:
        """What ``repartition`` to ``partitions`` would write (batch, version, keys and bytes
        per new partition, skew); raises ``RepartitionRefused`` when it would refuse. Reads
        the whole state (on ``engine``: Spark reads partitions as tasks); changes nothing."""
        from ckpt_cli.repartition.plan import plan_repartition

        return plan_repartition(self._checkpoint, partitions=partitions, engine=engine)

    def repartition(
        self,
        *,
        partitions: int,
        force: bool = False,
        quarantine: str | None = None,
        engine: Engine | None = None,
    ) -> RepartitionResult:
        """Change the number of state partitions to ``partitions``, as Spark's own repartition
        does (``ckpt repartition --apply``); refused while the query looks active unless
        ``force``. ``.manifest`` is what :meth:`undo_repartition` restores from.
        ``engine``: where partitions are read and written (``SparkEngine``: as tasks)."""
        from ckpt_cli.repartition.apply import default_quarantine, repartition, staged_plan

        where = quarantine or default_quarantine(self._checkpoint, time.time())
        plan = staged_plan(self._checkpoint, partitions, where, engine)
        try:
            return repartition(self._checkpoint, plan, force=force, quarantine=where, engine=engine)
        finally:
            plan.discard()

    def undo_repair(self, *, manifest: str | None = None, break_lock: bool = False) -> UndoResult:
        """What ``ckpt repair --undo`` does: put back everything the newest repair of this
        checkpoint (or the one of ``manifest``) changed; ``.already_undone`` says when an
        earlier undo did it (then nothing changes). See :mod:`ckpt_cli.repair.undo`."""
        from ckpt_cli.repair import undo_repair

        return undo_repair(self._checkpoint.storage, manifest=manifest, break_lock=break_lock)

    def undo_repartition(
        self, *, manifest: str | None = None, force: bool = False, break_lock: bool = False
    ) -> UndoResult:
        """What ``ckpt repartition --undo`` does: the checkpoint as it was before its newest
        repartition (or the one of ``manifest``); refused when the query ran batches after it,
        unless ``force``."""
        from ckpt_cli.repartition.run import undo_repartition

        return undo_repartition(
            self._checkpoint.storage, manifest=manifest, force=force, break_lock=break_lock
        )
