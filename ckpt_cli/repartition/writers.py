"""The files of one new partition's state version, per provider: the HDFS-backed store's
``<v>.snapshot``, or RocksDB's new SSTs then ``<v>.zip`` (checkpoint format v2:
``<v>_<uniqueId>.zip`` and, where the store has them, Spark's ``<zip>.crc``).

They are built into a local temporary directory, streamed from the staged records, so memory
stays bounded whatever the partition's size; the caller uploads them in order."""

from __future__ import annotations

import contextlib
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ckpt_cli.core.model import Checkpoint, FileKind
from ckpt_cli.core.rebuild import codec_of
from ckpt_cli.formats import compression
from ckpt_cli.formats.checksums import hadoop_crc_bytes
from ckpt_cli.formats.names import hadoop_crc_name
from ckpt_cli.formats.rocksdb_write import (
    VersionOptions,
    merge_delimiter,
    write_rocksdb_checkpoint,
)
from ckpt_cli.formats.snapshot_write import snapshot_body
from ckpt_cli.formats.state_encoders import row_checksums
from ckpt_cli.repartition.placement import staged_records
from ckpt_cli.repartition.plan import RepartitionPlan, StorePlan
from ckpt_cli.state.tws import list_families

# Bytes per Hadoop checksum (``file.bytes-per-checksum``) and read at a time: a multiple.
_BYTES_PER_CHECKSUM = 512
_READ = _BYTES_PER_CHECKSUM << 11


@dataclass
class StoreFiles:
    """(name in the store's directory, local file) in the order to write them, checksum
    sidecars included; the uniqueId of the version in checkpoint format v2."""

    files: list[tuple[str, Path]] = field(default_factory=list)
    unique_id: str | None = None


@contextlib.contextmanager
def store_files(
    ckpt: Checkpoint,
    plan: RepartitionPlan,
    store: StorePlan,
    staged: Iterable[bytes],
) -> Iterator[StoreFiles]:
    """The files of one new partition from the records staged for it (``staged``: placed
    records, as :func:`~ckpt_cli.repartition.placement.place_partition` writes them, in
    pieces), in a temporary directory removed on exit."""
    with tempfile.TemporaryDirectory(prefix="ckpt-repartition-files-") as tmp:
        dest = Path(tmp) / "files"
        out = _build(ckpt, plan, store, staged, dest)
        # Hadoop's local file system writes a .crc beside every file Spark writes.
        if ckpt.storage.is_local:
            out.files = [pair for name, path in out.files for pair in _with_crc(name, path)]
        yield out


def _build(
    ckpt: Checkpoint, plan: RepartitionPlan, store: StorePlan, staged: Iterable[bytes], dest: Path
) -> StoreFiles:
    if store.provider == "hdfs":
        # Records are staged in the snapshot's own record layout: the body is the staged
        # bytes and the end mark, compressed as it streams.
        name = f"{plan.version}.snapshot"
        dest.mkdir()
        with open(dest / name, "wb") as fh:
            for piece in compression.compressed_chunks(_then_end(staged), codec_of(ckpt)):
                fh.write(piece)
        return StoreFiles([(name, dest / name)])
    unique_id = str(uuid.uuid4()) if plan.checkpoint_format_version >= 2 else None
    written = write_rocksdb_checkpoint(
        staged_records(staged),
        plan.version,
        dest,
        VersionOptions(
            unique_id=unique_id,
            template=store.template,
            checksum_file=unique_id is not None and _has_spark_checksums(ckpt, store),
            # List values were merged by the RocksDB that read them: rejoin their elements
            # with Spark's delimiter, or Spark's reader misaligns them (a "," where it
            # expects none).
            list_families=list_families(ckpt, store.operator),
            delimiter=merge_delimiter(ckpt.conf),
            row_checksums=row_checksums(ckpt.conf),
        ),
    )
    return StoreFiles([(name, dest / name) for name in written.names], unique_id)


def _then_end(staged: Iterable[bytes]) -> Iterator[bytes]:
    yield from staged
    yield from snapshot_body(())


def _with_crc(name: str, path: Path) -> list[tuple[str, Path]]:
    """``name`` and the hidden ``.<name>.crc`` beside it, computed a piece at a time."""
    hidden = hadoop_crc_name(name)
    crc = path.with_name(hadoop_crc_name(path.name))
    header = hadoop_crc_bytes(b"", _BYTES_PER_CHECKSUM)
    with open(path, "rb") as src, open(crc, "wb") as out:
        out.write(header)
        while piece := src.read(_READ):
            out.write(hadoop_crc_bytes(piece, _BYTES_PER_CHECKSUM)[len(header) :])
    return [(name, path), (hidden, crc)]


def _has_spark_checksums(ckpt: Checkpoint, store: StorePlan) -> bool:
    """Whether Spark wrote ``<zip>.crc`` files in this store (4.1+ with file checksums on)."""
    prefix = f"state/{store.operator}/"
    return any(
        f.path.startswith(prefix) and (f.target or "").endswith(".zip")
        for f in ckpt.of_kind(FileKind.SPARK_CHECKSUM)
    )
