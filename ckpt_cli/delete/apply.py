"""Carrying a deletion out as batch N+1 (``change.batch.write_batch``: ``offsets/N+1`` a
copy of ``offsets/N``, every partition's version N+2, ``commits/N+1`` last), each file
recorded first in the write-ahead manifest so that ``--undo`` restores every byte.

Every partition gets version N+2, the ones without a matched key too (Spark loads version
N+2 of each): a delta or changelog of its removals (empty: only the end mark), or a new zip
of the keys it keeps.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ckpt_cli.change.batch import BatchChangeResult, BatchWriter, write_batch
from ckpt_cli.change.manifest import Manifest, fresh_quarantine
from ckpt_cli.core.layout import FileKind
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.core.read import iter_state, read_zip_metadata
from ckpt_cli.core.rebuild import codec_of, plan_version
from ckpt_cli.delete.plan import DeletePlan
from ckpt_cli.formats.rocksdb_write import VersionOptions, write_rocksdb_checkpoint
from ckpt_cli.formats.snapshot_write import encode_removals
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink

DELETE_PREFIX = "delete-"


@dataclass(frozen=True, kw_only=True)
class DeleteResult(BatchChangeResult):
    """What :func:`apply_plan` wrote (``removed``: keys), and the validation after."""

    DETAILS = "removed"

    removed: int


def default_quarantine(ckpt: Checkpoint, now: float) -> str:
    return fresh_quarantine(ckpt.storage, DELETE_PREFIX, now)


def apply_plan(
    ckpt: Checkpoint,
    plan: DeletePlan,
    where: str,
    now: float | None = None,
    progress: ProgressSink = NULL_PROGRESS,
) -> DeleteResult:
    """Write ``plan`` into ``ckpt`` (under the caller's lock, after its checks of the
    query's activity), its manifest in quarantine ``where``."""
    now = time.time() if now is None else now
    manifest = Manifest(ckpt.storage, where, now, lambda: {"delete": plan.body_json()})
    manifest.save()
    out = BatchWriter(ckpt, manifest)

    def state(out: BatchWriter) -> dict[int, list[list[str]]]:
        op = ckpt.operators[plan.operator]
        progress.start("Writing partitions", total=len(plan.partitions))
        try:
            for p in plan.partitions:
                base = op.stores[plan.store].partitions[p.partition].path
                _write_partition(ckpt, plan, p.partition, base, out)
                progress.advance()
        finally:
            progress.close()
        return {}

    write_batch(out, last=plan.last_committed, state=state)
    removed = sum(p.matched for p in plan.partitions)
    return DeleteResult.finish(manifest, out, list(plan.notes), removed=removed)


def _write_partition(
    ckpt: Checkpoint, plan: DeletePlan, partition: int, base: str, out: BatchWriter
) -> None:
    removed = plan.matched.get(partition, [])
    if plan.writes in ("delta", "changelog"):
        data = encode_removals(removed, codec_of(ckpt))
        out.write(f"{base}/{plan.version}.{plan.writes}", data)
        return
    gone = set(removed)
    version = plan_version(ckpt, plan.operator, partition, plan.last_committed + 1)
    kept = ((k, v) for k, v in iter_state(ckpt, version) if k not in gone)
    template = None
    if version.base is not None and version.base.kind is FileKind.ZIP:
        template = read_zip_metadata(ckpt.storage, version.base.path, version.base.entry.size)
    with tempfile.TemporaryDirectory(prefix="ckpt-delete-") as tmp:
        dest = Path(tmp) / "files"
        written = write_rocksdb_checkpoint(
            kept, plan.version, dest, VersionOptions(template=template)
        )
        for name in written.names:  # the SSTs first, the zip that names them last
            out.write(f"{base}/{name}", (dest / name).read_bytes())
