"""The log entries and metadata of a repartition batch: ``offsets/N+1``, ``commits/N+1`` and
each operator's metadata with the new partition count."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from ckpt_cli.core.model import Checkpoint
from ckpt_cli.errors import CkptError
from ckpt_cli.formats.logs import SHUFFLE_PARTITIONS

if TYPE_CHECKING:
    from ckpt_cli.repartition.plan import RepartitionPlan


_SHUFFLE_RE = re.compile(r'("' + re.escape(SHUFFLE_PARTITIONS) + r'"\s*:\s*")(\d+)(")')


def offsets_bytes(ckpt: Checkpoint, last: int, partitions: int) -> bytes:
    """``offsets/N`` with only ``spark.sql.shuffle.partitions`` changed (Spark copies the
    OffsetSeq and adds the conf; its JSON is the same but for that value)."""
    text = ckpt.storage.read_bytes(f"offsets/{last}").decode("utf-8")
    head, sep, rest = text.partition("\n")
    meta, nl, sources = rest.partition("\n")
    new_meta, count = _SHUFFLE_RE.subn(lambda m: f"{m[1]}{partitions}{m[3]}", meta)
    if count != 1:
        raise CkptError(f"offsets/{last}: expected one {SHUFFLE_PARTITIONS} in its conf")
    return f"{head}{sep}{new_meta}{nl}{sources}".encode()


def commit_bytes(ckpt: Checkpoint, last: int, unique_ids: dict[int, list[list[str]]]) -> bytes:
    """``commits/N`` copied; in checkpoint format v2 with ``stateUniqueIds`` naming the new
    files (operator -> partition -> store)."""
    data = ckpt.storage.read_bytes(f"commits/{last}")
    if not unique_ids:
        return data
    head, _, body = data.decode("utf-8").partition("\n")
    obj = json.loads(body) if body.strip() else {}
    obj["stateUniqueIds"] = {str(op): rows for op, rows in sorted(unique_ids.items())}
    return f"{head}\n{json.dumps(obj, separators=(',', ':'))}".encode()


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
