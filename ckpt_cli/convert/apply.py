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
import uuid
from dataclasses import dataclass
from pathlib import Path

from ckpt_cli.change.batch import BatchChangeResult, BatchWriter, write_batch
from ckpt_cli.change.manifest import Manifest
from ckpt_cli.convert.plan import (
    PROVIDER_CLASSES,
    ConvertPlan,
    PartitionSource,
    converted_records,
    partition_source,
    plan_convert,
    prefix_key_of,
)
from ckpt_cli.core.layout import DEFAULT_STORE
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.core.rebuild import codec_of
from ckpt_cli.formats import logs
from ckpt_cli.formats.rocksdb_write import (
    VersionOptions,
    merge_delimiter,
    write_rocksdb_checkpoint,
)
from ckpt_cli.formats.snapshot_write import encode_hdfs_snapshot
from ckpt_cli.formats.state_encoders import row_checksums
from ckpt_cli.progress import ProgressSink
from ckpt_cli.state.tws import list_families

CONVERT_PREFIX = "convert-"


@dataclass(frozen=True, kw_only=True)
class ConvertResult(BatchChangeResult):
    """What :func:`apply_plan` wrote and moved (files to the quarantine), and the validation
    after."""

    DETAILS = "moved"

    moved: int


def apply_plan(
    ckpt: Checkpoint, plan: ConvertPlan, where: str, now: float, progress: ProgressSink
) -> ConvertResult:
    """The steps above into quarantine ``where``, under the caller's lock and after its
    checks of the query's activity (``run_convert``'s)."""
    storage = ckpt.storage
    manifest = Manifest(storage, where, now, lambda: {"convert": plan.body_json()})
    manifest.save()
    out = BatchWriter(ckpt, manifest)
    # Spark 4.3 in format v1 parses every zip's name as a version (AutoSnapshotLoader's
    # getEligibleSnapshotsForVersion): a <v>_<uniqueId>.zip fails its restart. So from v1 to
    # v2 the zips wait until the old files are gone (their SSTs need not: no name is parsed).
    deferred: list[tuple[str, bytes]] | None = None
    if plan.provider_from == "rocksdb" and plan.checkpoint_format_version == 1:
        deferred = [] if plan.format_version == 2 else None
    unique_ids = _write_state(ckpt, plan, out, progress, deferred)
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
    for rel, data in deferred or ():
        out.write(rel, data)
    write_batch(
        out,
        last=plan.last_committed,
        state=lambda _: unique_ids,  # written above, before the offsets entry
        confs={logs.PROVIDER_CLASS: PROVIDER_CLASSES[plan.provider]},
        add_confs=True,  # an offsets entry of an older Spark may not name it
        format_version=plan.format_version,
    )
    return ConvertResult.finish(manifest, out, list(plan.notes), moved=len(plan.moved))


def _write_state(
    ckpt: Checkpoint,
    plan: ConvertPlan,
    out: BatchWriter,
    progress: ProgressSink,
    deferred: list[tuple[str, bytes]] | None,
) -> dict[int, list[list[str]]]:
    """Every partition's version N+2 (its zips kept in ``deferred`` when given); the
    uniqueIds of format v2 as ``commits/N+1`` records them (operator -> partition -> store,
    in the operator's store order)."""
    unique_ids: dict[int, list[list[str]]] = {}
    total = sum(s.partitions for s in plan.stores)
    progress.start("Writing partitions", total=total)
    try:
        for store in plan.stores:
            op = ckpt.operators[store.operator]
            index = list(op.stores).index(store.store)
            prefix_key = prefix_key_of(ckpt, store.operator, store.store) if plan.reframes else None
            for partition in sorted(op.stores[store.store].partitions):
                base = f"{op.path}/{partition}"
                if store.store != DEFAULT_STORE:
                    base = f"{base}/{store.store}"
                source = partition_source(
                    ckpt, plan, store.operator, store.store, partition, prefix_key
                )
                unique_id = _write_partition(ckpt, plan, base, source, out, deferred)
                if unique_id is not None:
                    rows = unique_ids.setdefault(store.operator, [])
                    while len(rows) <= partition:
                        rows.append([""] * len(op.stores))
                    rows[partition][index] = unique_id
                progress.advance()
    finally:
        progress.close()
    return unique_ids


def _write_partition(
    ckpt: Checkpoint,
    plan: ConvertPlan,
    base: str,
    source: PartitionSource,
    out: BatchWriter,
    deferred: list[tuple[str, bytes]] | None,
) -> str | None:
    records = converted_records(ckpt, plan, source)
    if plan.provider == "hdfs":
        data = encode_hdfs_snapshot(records, codec_of(ckpt))
        out.write(f"{base}/{plan.version}.snapshot", data)
        return None
    unique_id = str(uuid.uuid4()) if plan.format_version == 2 else None
    options = VersionOptions(
        unique_id=unique_id,  # format v2: Spark's <zip>.crc beside it, as 4.1+ writes
        template=source.template,
        list_families=list_families(ckpt, source.plan.operator) if source.template else (),
        delimiter=merge_delimiter(ckpt.conf),
        row_checksums=row_checksums(ckpt.conf),
    )
    with tempfile.TemporaryDirectory(prefix="ckpt-convert-") as tmp:
        dest = Path(tmp) / "files"
        written = write_rocksdb_checkpoint(records, plan.version, dest, options)
        # The SSTs first, the zip that names them last (written.names is in that order).
        for name in written.names:
            data = (dest / name).read_bytes()
            if deferred is not None and name.startswith(written.zip_name):
                deferred.append((f"{base}/{name}", data))  # the zip and its .crc: small
            else:
                out.write(f"{base}/{name}", data)
    return unique_id


__all__ = ["CONVERT_PREFIX", "ConvertResult", "apply_plan", "plan_convert"]
