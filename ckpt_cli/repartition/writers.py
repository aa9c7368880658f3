"""The files of one new partition's state version, per provider: the HDFS-backed store's
``<v>.snapshot``, or RocksDB's new SSTs then ``<v>.zip`` (checkpoint format v2:
``<v>_<uniqueId>.zip`` and, where the store has them, Spark's ``<zip>.crc``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from ckpt_cli.formats import compression
from ckpt_cli.formats.checksums import hadoop_crc_bytes
from ckpt_cli.formats.rocksdb_write import build_rocksdb_checkpoint, merge_delimiter
from ckpt_cli.formats.snapshot_write import snapshot_body
from ckpt_cli.formats.state_encoders import row_checksums
from ckpt_cli.model import Checkpoint, FileKind
from ckpt_cli.repartition.placement import staged_records
from ckpt_cli.repartition.plan import RepartitionPlan, StorePlan
from ckpt_cli.replay.plan import codec_of
from ckpt_cli.replay.tws import list_families


@dataclass
class StoreFiles:
    """(name in the store's directory, bytes) in the order to write them, checksum sidecars
    included; the uniqueId of the version in checkpoint format v2."""

    files: list[tuple[str, bytes]] = field(default_factory=list)
    unique_id: str | None = None


def store_files(
    ckpt: Checkpoint,
    plan: RepartitionPlan,
    store: StorePlan,
    staged: bytes,
) -> StoreFiles:
    """The files of one new partition from the records staged for it (``staged``: placed
    records, as :func:`~ckpt_cli.repartition.placement.place_partition` writes them)."""
    # Hadoop's local file system writes a .crc beside every file Spark writes.
    local = ckpt.storage.is_local
    if store.provider == "hdfs":
        # Records are staged in the snapshot's own record layout: the body is the staged
        # bytes and the end mark, compressed as it streams.
        body = [staged, *snapshot_body(())]
        data = b"".join(compression.compressed_chunks(body, codec_of(ckpt)))
        name = f"{plan.version}.snapshot"
        files = [(name, data)] + ([(f".{name}.crc", hadoop_crc_bytes(data))] if local else [])
        return StoreFiles(files)
    unique_id = str(uuid.uuid4()) if plan.checkpoint_format_version >= 2 else None
    built = build_rocksdb_checkpoint(
        staged_records(staged),
        plan.version,
        unique_id=unique_id,
        template=store.template,
        checksum_file=unique_id is not None and _has_spark_checksums(ckpt, store),
        # List values were merged by the RocksDB that read them: rejoin their elements with
        # Spark's delimiter, or Spark's reader misaligns them (a "," where it expects none).
        list_families=list_families(ckpt, store.operator),
        delimiter=merge_delimiter(ckpt.conf),
        row_checksums=row_checksums(ckpt.conf),
    )
    return StoreFiles(built.files(hadoop_crc=local), unique_id)


def _has_spark_checksums(ckpt: Checkpoint, store: StorePlan) -> bool:
    """Whether Spark wrote ``<zip>.crc`` files in this store (4.1+ with file checksums on)."""
    prefix = f"state/{store.operator}/"
    return any(
        f.path.startswith(prefix) and (f.target or "").endswith(".zip")
        for f in ckpt.of_kind(FileKind.SPARK_CHECKSUM)
    )
