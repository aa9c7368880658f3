"""Where each raw state record goes, for a whole store:
:func:`ckpt_cli.state.partition_keys.key_placer` with the column family ids of the zip the
records came from, its refusals as one :class:`UnsupportedOperator` line; and one old
partition's records placed and staged (:func:`place_partition`, the same on the driver and
in a Spark task)."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

from ckpt_cli.core.model import Checkpoint, Store
from ckpt_cli.core.read import iter_state
from ckpt_cli.core.rebuild import ReplayPlan
from ckpt_cli.errors import CkptError, FormatError
from ckpt_cli.formats.rocksdb_zip import RocksDBCheckpointMetadata
from ckpt_cli.formats.snapshot_write import with_hdfs_value_checksum
from ckpt_cli.formats.state_encoders import row_checksums
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.state.partition_keys import key_placer

# raw keys -> their new partitions
Placer = Callable[[Sequence[bytes]], npt.NDArray[np.int64]]


class UnsupportedOperator(CkptError, code="UNSUPPORTED_OPERATOR"):
    pass


def placer(
    ckpt: Checkpoint,
    operator: int,
    store: str,
    partitions: int,
    template: RocksDBCheckpointMetadata | None,
) -> Placer:
    """The new partitions of raw keys of ``store``; ``template``: the metadata of one of its
    zips (the column family ids of a store with families)."""
    cf_ids = template.column_family_mapping if template is not None else None
    try:
        keys = key_placer(ckpt, operator, store, cf_ids)
    except FormatError as exc:
        raise UnsupportedOperator(f"cannot repartition: {exc.message}", hint=exc.hint) from exc

    def place(raw_keys: Sequence[bytes]) -> npt.NDArray[np.int64]:
        try:
            return keys.partitions(raw_keys, partitions)
        except FormatError as exc:
            raise UnsupportedOperator(f"cannot repartition: {exc.message}") from exc

    return place


# -- staged records: [int32 keySize][key][int32 valueSize][value], uncompressed (the HDFS
# snapshot's record layout, so a snapshot is the staged bytes compressed) -------------------

_INT = struct.Struct(">i")
# Records placed at a time.
_CHUNK = 8192


# Staged bytes read at a time.
_PIECE = 1 << 20


def staged_pieces(read: Callable[[int], bytes]) -> Iterator[bytes]:
    """A staged file's bytes, a piece at a time (``read``: its stream's ``read``)."""
    while piece := read(_PIECE):
        yield piece


def staged_records(pieces: Iterable[bytes]) -> Iterator[tuple[bytes, bytes]]:
    """The records staged for one new partition, from its staged bytes in pieces of any
    size (a record may span pieces)."""
    unpack, rest = _INT.unpack_from, b""
    for piece in pieces:
        data = rest + piece if rest else piece
        at, end = 0, len(data)
        while at + 4 <= end:
            (size,) = unpack(data, at)
            value_at = at + 4 + size
            if value_at + 4 > end:
                break
            (size,) = unpack(data, value_at)
            stop = value_at + 4 + size
            if stop > end:
                break
            yield data[at + 4 : value_at], data[value_at + 4 : stop]
            at = stop
        rest = data[at:]
    if rest:
        raise CkptError(f"staged records end in the middle of a record ({len(rest)} bytes)")


@dataclass
class Placed:
    """What one old partition holds (records, bytes) and how it splits over the new ones."""

    keys: int
    bytes: int
    keys_after: list[int]
    bytes_after: list[int]


def place_partition(
    ckpt: Checkpoint,
    store: Store,
    version_plan: ReplayPlan,
    partitions: int,
    template: RocksDBCheckpointMetadata | None,
    sinks: list[BinaryIO] | None,
    progress: ProgressSink = NULL_PROGRESS,
) -> Placed:
    """Read one old partition's state and place every record (on the driver or in a Spark
    task); with ``sinks``, append each new partition's records to its sink."""
    m = partitions
    out = Placed(0, 0, [0] * m, [0] * m)
    placers: list[Placer] = []  # made for the first record: an empty store needs no schema
    # HDFS records come without their row checksums (verified as read): put them back.
    # RocksDB records keep theirs (``checksummed``).
    checksums = row_checksums(ckpt.conf)
    rechecksum = checksums and store.provider == "hdfs"

    def flush(chunk: list[tuple[bytes, bytes]]) -> None:
        # Placed a chunk at a time: the hash is vectorised over many keys.
        if not chunk:
            return
        if not placers:
            placers.append(placer(ckpt, version_plan.operator, store.name, m, template))
        news = placers[0]([key for key, _ in chunk]).tolist()
        pack = _INT.pack
        pieces: list[list[bytes]] = [[] for _ in range(m)]
        sizes = [0] * m
        counts = [0] * m
        for (key, value), new in zip(chunk, news, strict=True):
            if rechecksum:
                value = with_hdfs_value_checksum(key, value)
            pieces[new] += (pack(len(key)), key, pack(len(value)), value)
            sizes[new] += len(key) + len(value)
            counts[new] += 1
        out.keys += len(chunk)
        out.bytes += sum(sizes)
        for new in range(m):
            out.keys_after[new] += counts[new]
            out.bytes_after[new] += sizes[new]
            if sinks and pieces[new]:
                sinks[new].write(b"".join(pieces[new]))
        chunk.clear()

    chunk: list[tuple[bytes, bytes]] = []
    records = iter_state(ckpt, version_plan, progress, checksummed=checksums and not rechecksum)
    for record in records:
        chunk.append(record)
        if len(chunk) >= _CHUNK:
            flush(chunk)
    flush(chunk)
    return out
