"""The files of one new partition's state version, per provider: the HDFS-backed store's
``<v>.snapshot``, or RocksDB's ``<v>.zip`` with its new SSTs (format v2:
``<v>_<uniqueId>.zip`` and Spark's checksum sidecar)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ckpt_cli.formats.snapshot_write import encode_hdfs_snapshot
from ckpt_cli.model import Checkpoint
from ckpt_cli.repartition.plan import RepartitionPlan
from ckpt_cli.replay.plan import codec_of


@dataclass
class StoreFiles:
    """(name in the store's directory, bytes, whether Hadoop's ``.crc`` goes beside it), in
    the order to write them; the uniqueId of the version in checkpoint format v2."""

    files: list[tuple[str, bytes, bool]] = field(default_factory=list)
    unique_id: str | None = None


def store_files(
    ckpt: Checkpoint,
    plan: RepartitionPlan,
    operator: int,
    store: str,
    partition: int,
    records: Iterable[tuple[bytes, bytes]],
) -> StoreFiles:
    provider = ckpt.operators[operator].stores[store].provider
    if provider == "hdfs":
        data = encode_hdfs_snapshot(records, codec_of(ckpt))
        return StoreFiles([(f"{plan.version}.snapshot", data, True)])
    raise NotImplementedError(provider)
