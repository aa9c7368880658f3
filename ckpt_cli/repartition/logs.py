"""The operator metadata of a repartition batch, with the new partition count (its log
entries are the change engine's: ``change.batch``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ckpt_cli.core.model import Checkpoint
from ckpt_cli.errors import CkptError

if TYPE_CHECKING:
    from ckpt_cli.repartition.plan import RepartitionPlan


def _with_partitions(path: str, data: bytes, partitions: int) -> bytes:
    head, _, body = data.decode("utf-8").partition("\n")
    try:
        obj = json.loads(body)
        for info in obj["stateStoreInfo"]:
            info["numPartitions"] = partitions
    except (ValueError, KeyError, TypeError) as exc:
        raise CkptError(f"{path}: unreadable operator metadata: {exc}") from exc
    return f"{head}\n{json.dumps(obj, separators=(',', ':'), ensure_ascii=False)}".encode()


def operator_metadata_files(ckpt: Checkpoint, plan: RepartitionPlan) -> dict[str, bytes]:
    """Each operator's metadata with the new partition count: ``_metadata/metadata`` (v1,
    which Spark leaves saying the old count), and ``_metadata/v2/<N+1>`` from the newest v2
    file of a batch <= N (what Spark's runner writes for v2)."""
    out: dict[str, bytes] = {}
    for op in ckpt.operators.values():
        v1 = f"{op.path}/_metadata/metadata"
        if ckpt.listing.get(v1) is not None:
            out[v1] = _with_partitions(v1, ckpt.storage.read_bytes(v1), plan.partitions)
        older = [b for b in op.metadata_v2_files if b <= plan.last_committed]
        if older:
            src = op.metadata_v2_files[max(older)].path
            dest = f"{op.path}/_metadata/v2/{plan.batch}"
            out[dest] = _with_partitions(src, ckpt.storage.read_bytes(src), plan.partitions)
    return out
