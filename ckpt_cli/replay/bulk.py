"""A partition's state merged in bulk, for the columnar replay: records as offsets into one
buffer (``Packed``), never a Python object per record.

HDFS-backed stores (a snapshot and/or deltas, no row checksums) whose files are small
enough to hold at once (``BULK_BYTES`` compressed per partition): every file is decompressed
into one buffer, its records framed by offset (``[int32 BE keySize][key][int32 BE
valueSize][value]``, -1 a remove, -1 key size the end), the keys hashed in bulk by Arrow
(``dictionary_encode``), and per key the last record wins, as applying the files in order
does. Rows come in the order a key first appears (a snapshot's order, then keys new in the
deltas), as ``read.iter_state`` gives them from a snapshot.

Anything else (RocksDB, row checksums, a large partition) and any file that does not frame
cleanly go through ``read.iter_state`` (which streams, and names the problem in its error),
its pairs packed a batch at a time.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from ckpt_cli.formats import compression
from ckpt_cli.formats.records import MAX_RECORD_BYTES
from ckpt_cli.formats.state_encoders import row_checksums
from ckpt_cli.model import Checkpoint, FileKind
from ckpt_cli.replay.plan import ReplayPlan, codec_of
from ckpt_cli.replay.read import iter_state

BATCH_ROWS = 65536
# Partitions whose files are at most this many compressed bytes are merged in memory.
BULK_BYTES = 64 << 20

_INT = struct.Struct(">i")


@dataclass
class Packed:
    """A batch of ``(key, value)`` records: ``data[key_offsets[i]:][:key_sizes[i]]`` and the
    same for values (numpy int64 arrays)."""

    data: bytes
    key_offsets: Any
    key_sizes: Any
    value_offsets: Any
    value_sizes: Any

    def __len__(self) -> int:
        return len(self.key_offsets)

    @classmethod
    def of(cls, pairs: Sequence[tuple[bytes, bytes]]) -> Packed:
        import numpy as np

        rows = [k for k, _ in pairs] + [v for _, v in pairs]
        sizes = np.fromiter(map(len, rows), np.int64, len(rows))
        offsets = np.cumsum(sizes) - sizes
        n = len(pairs)
        return cls(b"".join(rows), offsets[:n], sizes[:n], offsets[n:], sizes[n:])

    def pairs(self) -> list[tuple[bytes, bytes]]:
        """The records as bytes (for the row path)."""
        data = self.data
        return [
            (data[k : k + ks], data[v : v + vs])
            for k, ks, v, vs in zip(
                self.key_offsets.tolist(),
                self.key_sizes.tolist(),
                self.value_offsets.tolist(),
                self.value_sizes.tolist(),
                strict=True,
            )
        ]


def packed_batches(
    ckpt: Checkpoint, plan: ReplayPlan, limit: int | None = None, size: int = BATCH_ROWS
) -> Iterator[Packed]:
    """The state of ``plan`` (at most ``limit`` rows) in batches of ``size``."""
    merged = _merged(ckpt, plan) if _bulk(ckpt, plan) else None
    if merged is None:
        with closing(iter_state(ckpt, plan)) as pairs:
            rows = itertools.islice(pairs, limit)
            while chunk := list(itertools.islice(rows, size)):
                yield Packed.of(chunk)
        return
    total = len(merged) if limit is None else min(limit, len(merged))
    for start in range(0, total, size):
        end = min(start + size, total)
        yield Packed(
            merged.data,
            merged.key_offsets[start:end],
            merged.key_sizes[start:end],
            merged.value_offsets[start:end],
            merged.value_sizes[start:end],
        )


def _bulk(ckpt: Checkpoint, plan: ReplayPlan) -> bool:
    if plan.provider != "hdfs" or row_checksums(ckpt.conf):
        return False
    if any(f.kind is not FileKind.DELTA for f in plan.steps):
        return False
    if plan.base is not None and plan.base.kind is not FileKind.SNAPSHOT:
        return False
    return sum(f.entry.size or 0 for f in plan.files) <= BULK_BYTES


def _frame(data: bytes, base: int, snapshot: bool, out: list[list[int]]) -> bool:
    """Append the records of one decompressed file (at ``base`` in the joined buffer) to
    ``out`` (key offsets, key sizes, value offsets, value sizes; -1 a remove); False when
    the file does not end cleanly with its end marker."""
    unpack = _INT.unpack_from
    key_offsets, key_sizes, value_offsets, value_sizes = out
    pos, end = 0, len(data)
    while pos + 4 <= end:
        (key_size,) = unpack(data, pos)
        if key_size == -1:
            return True
        if key_size < 0 or key_size > MAX_RECORD_BYTES or pos + 8 + key_size > end:
            return False
        (value_size,) = unpack(data, pos + 4 + key_size)
        key_offsets.append(base + pos + 4)
        key_sizes.append(key_size)
        if value_size == -1 and not snapshot:
            value_offsets.append(0)
            value_sizes.append(-1)
            pos += 8 + key_size
            continue
        if value_size < 0 or value_size > MAX_RECORD_BYTES or pos + 8 + key_size + value_size > end:
            return False
        value_offsets.append(base + pos + 8 + key_size)
        value_sizes.append(value_size)
        pos += 8 + key_size + value_size
    return False


def _merged(ckpt: Checkpoint, plan: ReplayPlan) -> Packed | None:
    """The plan's files merged, or None when one does not frame cleanly."""
    import numpy as np
    import pyarrow as pa

    parts: list[bytes] = []
    out: list[list[int]] = [[], [], [], []]
    size = 0
    for f in plan.files:
        with ckpt.storage.open_stream(f.path) as fh:
            data = b"".join(compression.decompressed_chunks(f.path, fh, codec=codec_of(ckpt)))
        if not _frame(data, size, f.kind is FileKind.SNAPSHOT, out):
            return None
        parts.append(data)
        size += len(data)
    buf = b"".join(parts)
    del parts
    key_offsets, key_sizes, value_offsets, value_sizes = (np.array(a, np.int64) for a in out)
    n = len(key_offsets)
    if n == 0:
        return Packed(buf, key_offsets, key_sizes, value_offsets, value_sizes)
    # The keys in one Arrow array (records are in buffer order, so a filter over the buffer
    # cuts them out), hashed in bulk: one dictionary index per record.
    bounds = np.empty(2 * n + 1, np.int64)
    bounds[0] = 0
    bounds[1::2] = key_offsets
    bounds[2::2] = key_offsets + key_sizes
    pieces = pa.Array.from_buffers(
        pa.large_binary(), 2 * n, [None, pa.py_buffer(bounds), pa.py_buffer(buf)]
    )
    keep = np.zeros(2 * n, np.bool_)
    keep[1::2] = True
    ids = pieces.filter(pa.array(keep)).dictionary_encode().indices.to_numpy()
    # Per key: its first record (the row's position) and its last (its value).
    _, first = np.unique(ids, return_index=True)
    _, from_end = np.unique(ids[::-1], return_index=True)
    last = n - 1 - from_end
    order = np.argsort(first, kind="stable")
    first, last = first[order], last[order]
    alive = value_sizes[last] >= 0
    first, last = first[alive], last[alive]
    return Packed(buf, key_offsets[first], key_sizes[first], value_offsets[last], value_sizes[last])
