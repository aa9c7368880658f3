"""Carrying a conversion out, each file recorded first in the write-ahead manifest so that
``--undo`` restores every byte.

Order, chosen so that Spark never restarts into wrong state, whatever the point a kill
stops it at:

1. every partition's version N+2 in the new files (``N+2.snapshot``; or the SSTs, then
   ``N+2.zip`` or, format v2, ``N+2_<uniqueId>.zip``), each before its checksum sidecar.
   The old provider or format does not see them (the HDFS-backed store reads only
   ``<v>.delta`` and ``<v>.snapshot``, RocksDB only ``.zip`` and ``.changelog``; format v1
   loads versions up to N+1, format v2 the uniqueIds ``commits/N`` names): a restart here
   runs as if nothing had happened. From format v1 to v2 the zips wait for step 2: Spark
   4.3's format-v1 loader parses every zip name as a version and fails on
   ``<v>_<uniqueId>.zip``;
2. the old provider's files move to the quarantine, newest version first: a restart part
   way (still the old provider) fails on the missing version N+1 instead of loading an
   older one;
3. ``offsets/N+1``: a copy of ``offsets/N`` naming the new provider class. A restart from
   here re-runs batch N+1 with the new provider (and the old format, which ``commits/N``
   pins), which finds no version N+1 and fails (HDFS: no delta to replay; RocksDB: no
   changelog), so nothing runs on wrong state;
4. ``commits/N+1`` last, in the new format's header (v2: the new uniqueIds): the
   conversion is done when it exists. Spark restarts at batch N+2 from version N+2.

``ckpt convert --undo`` puts back every moved file and removes every written one.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ckpt_cli.change.batch import BatchChangeResult, BatchWriter, write_batch
from ckpt_cli.change.manifest import Manifest
from ckpt_cli.convert.plan import PROVIDER_CLASSES, ConvertPlan, plan_convert, prefix_key_of
from ckpt_cli.convert.tasks import (
    Built,
    PartUnit,
    build_partitions,
    is_zip_entry,
    partition_files,
    staged_dir,
)
from ckpt_cli.core.layout import DEFAULT_STORE
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.core.unfinished import batch_partitions
from ckpt_cli.engine import Engine
from ckpt_cli.formats import logs
from ckpt_cli.progress import ProgressSink
from ckpt_cli.storage import Storage

CONVERT_PREFIX = "convert-"


@dataclass(frozen=True, kw_only=True)
class ConvertResult(BatchChangeResult):
    """What :func:`apply_plan` wrote and moved (files to the quarantine), and the validation
    after."""

    DETAILS = "moved"

    moved: int


def apply_plan(
    ckpt: Checkpoint,
    plan: ConvertPlan,
    where: str,
    now: float,
    progress: ProgressSink,
    engine: Engine | None = None,
) -> ConvertResult:
    """The steps above into quarantine ``where``, under the caller's lock and after its
    checks of the query's activity (``run_convert``'s). ``engine``: a distributed one
    builds the partitions' files as tasks, staged in ``<where>/staging``."""
    storage = ckpt.storage
    manifest = Manifest(storage, where, now, lambda: {"convert": plan.body_json()})
    manifest.save()
    out = BatchWriter(ckpt, manifest)
    # Spark 4.3 in format v1 parses every zip's name as a version (AutoSnapshotLoader's
    # getEligibleSnapshotsForVersion): a <v>_<uniqueId>.zip fails its restart. So from v1 to
    # v2 the zips wait until the old files are gone (their SSTs need not: no name is parsed).
    defer = (
        plan.provider_from == "rocksdb"
        and plan.checkpoint_format_version == 1
        and plan.format_version == 2
    )
    units = part_units(ckpt, plan)
    staging = None
    if engine is not None and engine.name != "local":
        staging = storage.elsewhere(f"{where.rstrip('/')}/staging")
    try:
        writer = _Writer(ckpt, plan, out, defer, staging, where)
        if staging is not None:
            assert engine is not None
            built = build_partitions(ckpt, plan, units, staging, engine, progress)
            unique_ids = writer.move_in_built(units, built, progress)
        else:
            unique_ids = writer.write_built(units, progress)
        progress.start("Moving the old files", total=len(plan.moved))
        try:
            for rel in plan.moved:
                # A stray file of version N+2 by the name just written stays (the manifest
                # saved it, so --undo brings it back).
                if rel not in out.written:
                    manifest.move_out(rel)
                progress.advance()
        finally:
            progress.close()
        writer.finish_deferred()
    finally:
        if staging is not None:
            staging.delete_tree(within=where)
    write_batch(
        out,
        last=plan.last_committed,
        state=lambda _: unique_ids,  # written above, before the offsets entry
        confs={logs.PROVIDER_CLASS: PROVIDER_CLASSES[plan.provider]},
        add_confs=True,  # an offsets entry of an older Spark may not name it
        format_version=plan.format_version,
    )
    return ConvertResult.finish(manifest, out, list(plan.notes), moved=len(plan.moved))


def part_units(ckpt: Checkpoint, plan: ConvertPlan) -> list[PartUnit]:
    """Every store partition of the plan, in the order their files are written."""
    units = []
    for store in plan.stores:
        prefix_key = prefix_key_of(ckpt, store.operator, store.store) if plan.reframes else None
        st = ckpt.operators[store.operator].stores[store.store]
        units += [
            PartUnit(store.operator, store.store, p, prefix_key) for p in batch_partitions(ckpt, st)
        ]
    return units


class _Writer:
    """Version N+2's files into the checkpoint, unit by unit; the zips kept back until
    :meth:`finish_deferred` when ``defer``; the uniqueIds gathered for ``commits/N+1``
    (operator -> partition -> store, in the operator's store order)."""

    def __init__(
        self,
        ckpt: Checkpoint,
        plan: ConvertPlan,
        out: BatchWriter,
        defer: bool,
        staging: Storage | None,
        where: str,
    ) -> None:
        self.ckpt, self.plan, self.out, self.defer = ckpt, plan, out, defer
        self.staging, self.where = staging, where
        self.unique_ids: dict[int, list[list[str]]] = {}
        self.deferred: list[Callable[[], None]] = []

    def _base(self, unit: PartUnit) -> str:
        base = f"{self.ckpt.operators[unit.operator].path}/{unit.partition}"
        return base if unit.store == DEFAULT_STORE else f"{base}/{unit.store}"

    def _record(self, unit: PartUnit, unique_id: str | None) -> None:
        if unique_id is None:
            return
        op = self.ckpt.operators[unit.operator]
        rows = self.unique_ids.setdefault(unit.operator, [])
        while len(rows) <= unit.partition:
            rows.append([""] * len(op.stores))
        rows[unit.partition][list(op.stores).index(unit.store)] = unique_id

    def write_built(
        self, units: list[PartUnit], progress: ProgressSink
    ) -> dict[int, list[list[str]]]:
        """Each unit built here, in a temporary directory, and written."""
        progress.start("Writing partitions", total=len(units))
        try:
            for unit in units:
                with tempfile.TemporaryDirectory(prefix="ckpt-convert-") as tmp:
                    dest = Path(tmp) / "files"
                    names, unique_id = partition_files(self.ckpt, self.plan, unit, dest)
                    for name in names:
                        rel, data = f"{self._base(unit)}/{name}", (dest / name).read_bytes()
                        if self.defer and is_zip_entry(name):  # the zip and its .crc: small
                            self.deferred.append(partial(self.out.write, rel, data))
                        else:
                            self.out.write(rel, data)
                self._record(unit, unique_id)
                progress.advance()
        finally:
            progress.close()
        return self.unique_ids

    def move_in_built(
        self, units: list[PartUnit], built: list[Built], progress: ProgressSink
    ) -> dict[int, list[list[str]]]:
        """Each unit's files, built by a task into the staging, moved in."""
        assert self.staging is not None
        staging = self.staging
        progress.start("Moving partitions in", total=len(units))
        try:
            for unit, (files, unique_id) in zip(units, built, strict=True):
                for name, size in files:
                    rel = f"{self._base(unit)}/{name}"
                    location = staging.full_path(f"{staged_dir(unit)}/{name}")

                    def move(rel: str = rel, location: str = location, size: int = size) -> None:
                        self.out.move_in(rel, location, size, within=self.where)

                    if self.defer and is_zip_entry(name):
                        self.deferred.append(move)
                    else:
                        move()
                self._record(unit, unique_id)
                progress.advance()
        finally:
            progress.close()
        return self.unique_ids

    def finish_deferred(self) -> None:
        for write in self.deferred:
            write()


__all__ = ["CONVERT_PREFIX", "ConvertResult", "apply_plan", "plan_convert"]
