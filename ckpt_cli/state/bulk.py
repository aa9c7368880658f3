"""A partition's state merged in bulk, for the columnar replay: records as offsets into one
buffer (``Packed``), never a Python object per record.

HDFS-backed stores (a snapshot and/or deltas, no row checksums) whose files are small
enough to hold at once (``BULK_BYTES`` compressed per partition): every file is decompressed
into one buffer, its records framed by offset (``[int32 BE keySize][key][int32 BE
valueSize][value]``, -1 a remove, -1 key size the end), the keys hashed in bulk with numpy
(records of one hash compared word by word), and per key the last record wins, as applying
the files in order does. Rows come in the order a key first appears (a snapshot's order,
then keys new in the deltas), as ``read.iter_state`` gives them from a snapshot.

Anything else (RocksDB, row checksums, a large partition) and any file that does not frame
cleanly go through ``read.iter_state`` (which streams, and names the problem in its error),
its pairs packed a batch at a time.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from ckpt_cli.core import kernel
from ckpt_cli.core.model import Checkpoint, CheckpointFile, FileKind
from ckpt_cli.core.read import iter_state
from ckpt_cli.core.rebuild import ReplayPlan, codec_of
from ckpt_cli.formats import compression
from ckpt_cli.formats.record_frames import frame
from ckpt_cli.formats.records import RecordColumns
from ckpt_cli.formats.state_encoders import row_checksums

BATCH_ROWS = 16384  # large enough that per-batch costs vanish, small to bound memory
# Partitions whose files are at most this many compressed bytes are merged in memory.
BULK_BYTES = 64 << 20


@dataclass
class Packed(RecordColumns):
    """A batch of ``(key, value)`` records. ``data`` is bytes or, for merged state, a
    bytearray (any buffer numpy and Arrow read)."""

    @classmethod
    def of(cls, pairs: Sequence[tuple[bytes, bytes]]) -> Packed:
        import numpy as np

        flat = list(itertools.chain.from_iterable(pairs))
        return cls.of_flat(flat, np.fromiter(map(len, flat), np.int64, len(flat)))

    @classmethod
    def of_flat(cls, flat: Sequence[bytes], sizes: Any) -> Packed:
        """The records of ``[key, value, key, value, ...]`` whose lengths are ``sizes``."""
        import numpy as np

        offsets = np.cumsum(sizes) - sizes
        keys, values = offsets.reshape(-1, 2).T, sizes.reshape(-1, 2).T
        return cls(
            b"".join(flat),
            np.ascontiguousarray(keys[0]),
            np.ascontiguousarray(values[0]),
            np.ascontiguousarray(keys[1]),
            np.ascontiguousarray(values[1]),
        )

    def pairs(self) -> list[tuple[bytes, bytes]]:
        """The records as bytes (for the row path)."""
        data = memoryview(self.data)
        return [
            (data[k : k + ks].tobytes(), data[v : v + vs].tobytes())
            for k, ks, v, vs in zip(
                self.key_offsets.tolist(),
                self.key_sizes.tolist(),
                self.value_offsets.tolist(),
                self.value_sizes.tolist(),
                strict=True,
            )
        ]


def packed_batches(
    ckpt: Checkpoint, plan: ReplayPlan, limit: int | None = None, size: int | None = None
) -> Iterator[Packed]:
    """The state of ``plan`` (at most ``limit`` rows) in batches of ``size`` (default
    ``BATCH_ROWS``)."""
    size = size or BATCH_ROWS
    if plan.provider == "rocksdb":
        from ckpt_cli.state.bulk_rocksdb import rocksdb_batches

        rocks = rocksdb_batches(ckpt, plan, size)
        if rocks is not None:
            yield from _limited(rocks, limit)
            return
    merged = _merged(ckpt, plan) if _bulk(ckpt, plan) else None
    if merged is None:
        with closing(iter_state(ckpt, plan)) as pairs:
            rows = itertools.islice(pairs, limit)
            while chunk := list(itertools.islice(rows, size)):
                yield Packed.of(chunk)
        return
    yield from _limited(sliced(merged, size), limit)


def sliced(merged: Packed, size: int) -> Iterator[Packed]:
    """``merged`` in batches of ``size`` records (views of its buffer)."""
    for start in range(0, len(merged), size):
        end = start + size
        yield Packed(
            merged.data,
            merged.key_offsets[start:end],
            merged.key_sizes[start:end],
            merged.value_offsets[start:end],
            merged.value_sizes[start:end],
        )


def _limited(batches: Iterable[Packed], limit: int | None) -> Iterator[Packed]:
    """The batches up to ``limit`` records in all (the last one cut short)."""
    left = limit
    for batch in batches:
        if left is not None and len(batch) >= left:
            if left:
                yield next(sliced(batch, left))
            return
        if left is not None:
            left -= len(batch)
        yield batch


def _bulk(ckpt: Checkpoint, plan: ReplayPlan) -> bool:
    if plan.provider != "hdfs" or row_checksums(ckpt.conf):
        return False
    if any(f.kind is not FileKind.DELTA for f in plan.steps):
        return False
    if plan.base is not None and plan.base.kind is not FileKind.SNAPSHOT:
        return False
    return sum(f.entry.size or 0 for f in plan.files) <= BULK_BYTES


def decompressed(ckpt: Checkpoint, f: CheckpointFile) -> bytes:
    """A state file's bytes, decompressed whole."""
    with ckpt.storage.open_stream(f.path) as fh:
        return b"".join(compression.decompressed_chunks(f.path, fh, codec=codec_of(ckpt)))


def framed_records(data: bytes, snapshot: bool, start: int = 0) -> Packed | None:
    """The records of one decompressed file as a ``Packed`` over it (value size -1 for a
    remove), or None when it does not frame cleanly (see ``record_frames.frame``)."""
    records = frame(data, snapshot, start)
    if records is None:
        return None
    at, key_sizes, value_sizes = records
    key_offsets = at + 4
    return Packed(data, key_offsets, key_sizes, key_offsets + key_sizes + 4, value_sizes)


def joined(parts: Iterable[Packed]) -> Packed:
    """The records of ``parts`` in order, over one buffer. Parts are copied in as they come
    (a large buffer grows in place), so a caller that makes them lazily holds one part beside
    the buffer, not two copies of the whole."""
    import numpy as np

    buf = bytearray()
    columns: list[list[Any]] = [[], [], [], []]
    for part in parts:
        shift = len(buf)
        buf += part.data
        columns[0].append(part.key_offsets + shift)
        columns[1].append(part.key_sizes)
        columns[2].append(part.value_offsets + shift)
        columns[3].append(part.value_sizes)
    empty = np.zeros(0, np.int64)
    # The buffer stays a bytearray: bytes(buf) would copy it whole.
    return Packed(buf, *(np.concatenate(c) if c else empty for c in columns))


def last_per_key(records: Packed, removes: bool = False) -> Packed | None:
    """Per key, its first record's key and its last record's value, ordered by first
    record: applying the records in order. A key whose last record is a remove is left out
    (kept, value size -1, with ``removes``). None when two keys' hashes collide."""
    if not len(records):
        return records
    groups = _same_keys(records.data, records.key_offsets, records.key_sizes)
    if groups is None:
        return None
    first, last, _, _ = groups
    if not removes:
        alive = records.value_sizes[last] >= 0
        first, last = first[alive], last[alive]
    return _kept(records, first, last)


@dataclass
class Changes:
    """``last_per_key(records, removes=True)`` and the hashes (``key_hashes``) of its keys,
    ascending: ``hashes[i]`` is the hash of ``records`` row ``order[i]``."""

    records: Packed
    hashes: Any
    order: Any


def last_changes(records: Packed) -> Changes | None:
    """The last record per key, removes kept, with the key hashes it was grouped by (for
    looking keys up among them: no second hashing or sort). None when two keys' hashes
    collide."""
    import numpy as np

    if not len(records):
        return Changes(records, np.zeros(0, np.uint64), np.zeros(0, np.int64))
    groups = _same_keys(records.data, records.key_offsets, records.key_sizes)
    if groups is None:
        return None
    first, last, hashes, by_first = groups
    order = np.empty(len(by_first), np.int64)
    order[by_first] = np.arange(len(by_first))
    return Changes(_kept(records, first, last), hashes, order)


def _kept(records: Packed, first: Any, last: Any) -> Packed:
    """Per key, record ``first[i]``'s key and record ``last[i]``'s value."""
    return Packed(
        records.data,
        records.key_offsets[first],
        records.key_sizes[first],
        records.value_offsets[last],
        records.value_sizes[last],
    )


def _merged(ckpt: Checkpoint, plan: ReplayPlan) -> Packed | None:
    """The plan's files merged, or None when one does not frame cleanly."""
    import numpy as np

    if kernel.load() is not None:
        return _kernel_merged(ckpt, plan)
    # Every file decompressed straight into one buffer: no file's bytes beside their copy.
    buf = bytearray()
    framed = []
    for f in plan.files:
        start = len(buf)
        with ckpt.storage.open_stream(f.path) as fh:
            for chunk in compression.decompressed_chunks(f.path, fh, codec=codec_of(ckpt)):
                buf += chunk
        # Framed before the next file is added: a truncated file ends the buffer.
        records = frame(buf, f.kind is FileKind.SNAPSHOT, start)
        if records is None:
            return None
        framed.append(records)
    if not framed:
        framed.append((np.zeros(0, np.int64),) * 3)
    # 8 bytes a record per array, several per record: no copy kept beside another.
    at, key_sizes, value_sizes = (
        np.concatenate(column) if len(column) > 1 else column[0]
        for column in zip(*framed, strict=True)
    )
    del framed
    key_offsets = at + 4
    del at
    merged = Packed(buf, key_offsets, key_sizes, key_offsets + key_sizes + 4, value_sizes)
    if not plan.steps and plan.base is not None:
        return merged  # a snapshot alone holds each key once
    return last_per_key(merged)


def _kernel_merged(ckpt: Checkpoint, plan: ReplayPlan) -> Packed | None:
    """``_merged`` by the compiled kernel: the files decompressed into one buffer, then
    framed and merged there in one pass (no array per record)."""
    buf, spans = decompressed_files(ckpt, plan.files)
    segments = [
        (start, end, f.kind is FileKind.SNAPSHOT)
        for f, (start, end) in zip(plan.files, spans, strict=True)
    ]
    # A snapshot alone holds each key once: framed, not merged.
    merged = kernel.merge(buf, segments, dedupe=bool(plan.steps) or plan.base is None)
    return None if merged is None else kernel_packed(buf, merged)


def kernel_packed(data: bytes | bytearray, merged: Any) -> Packed:
    """The records of a kernel merge as a ``Packed`` over ``data`` (no copy)."""
    import numpy as np

    return Packed(
        data,
        np.frombuffer(merged.key_offsets, np.int64),
        np.frombuffer(merged.key_sizes, np.int32),
        np.frombuffer(merged.value_offsets, np.int64),
        np.frombuffer(merged.value_sizes, np.int32),
    )


def whole_lz4(ckpt: Checkpoint, files: list[CheckpointFile]) -> tuple[bytes, list[int]] | None:
    """The files' decompressed bytes one after another, and where each ends, by the kernel
    in one call without the GIL (so partitions read in threads overlap: the Python reader
    frames block after block under it): lz4 files read whole, up to
    ``kernel.WHOLE_FILES_BYTES`` together. None otherwise, or where a file is damaged (the
    caller's reader then names the problem)."""
    if not files or codec_of(ckpt) != compression.LZ4:
        return None
    if sum(f.entry.size for f in files) > kernel.WHOLE_FILES_BYTES:
        return None
    return kernel.lz4_files([ckpt.storage.read_bytes(f.path) for f in files])


def decompressed_files(
    ckpt: Checkpoint, files: list[CheckpointFile]
) -> tuple[bytes | bytearray, list[tuple[int, int]]]:
    """The files' decompressed bytes one after another in one buffer, and where each is
    (start, end): lz4 files whole by the kernel (``whole_lz4``), else streamed in."""
    whole = whole_lz4(ckpt, files)
    if whole is not None:
        data, ends = whole
        return data, list(zip([0, *ends[:-1]], ends, strict=True))
    buf = bytearray()
    spans = []
    for f in files:
        start = len(buf)
        with ckpt.storage.open_stream(f.path) as fh:
            for chunk in compression.decompressed_chunks(f.path, fh, codec=codec_of(ckpt)):
                buf += chunk
        spans.append((start, len(buf)))
    return buf, spans


_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3


def key_hashes(buf: Any, offsets: Any, sizes: Any) -> Any:
    """A 64-bit hash of each key ``buf[offsets[i]:][:sizes[i]]``, in bulk: its ``size % 8``
    leading bytes one at a time (RocksDB's version byte and column family before an
    UnsafeRow), then a word at a time over every key still that long (FNV-1a on 64-bit
    words, the length mixed in first)."""
    import numpy as np

    view = np.ndarray((max(0, len(buf) - 7),), "<u8", buffer=buf, strides=(1,))
    bytes_view = np.frombuffer(buf, np.uint8)
    lead = sizes % 8
    words = sizes // 8
    hashes = np.full(len(offsets), _FNV_OFFSET, np.uint64) ^ sizes.astype(np.uint64)
    prime, shift = np.uint64(_FNV_PRIME), np.uint64(29)
    for j in range(int(lead.max(initial=0))):
        live = np.flatnonzero(lead > j)
        mixed = (hashes[live] ^ bytes_view[offsets[live] + j]) * prime
        hashes[live] = mixed ^ (mixed >> shift)
    at = offsets + lead
    shortest = int(words.min()) if len(words) else 0
    for j in range(int(words.max(initial=0))):
        if j < shortest:  # every key this long: in place, no index arrays
            hashes ^= view[at + 8 * j]
            hashes *= prime
            hashes ^= hashes >> shift
            continue
        live = np.flatnonzero(words > j)
        mixed = (hashes[live] ^ view[at[live] + 8 * j]) * prime
        hashes[live] = mixed ^ (mixed >> shift)
    return hashes


def keys_equal(a: Any, a_at: Any, b: Any, b_at: Any, sizes: Any) -> Any:
    """Per key, whether ``a[a_at[i]:][:sizes[i]]`` equals ``b[b_at[i]:][:sizes[i]]``, in bulk:
    the ``size % 8`` leading bytes one at a time, then a word at a time (as ``key_hashes``
    reads them)."""
    import numpy as np

    same = np.ones(len(sizes), bool)
    a_bytes, b_bytes = np.frombuffer(a, np.uint8), np.frombuffer(b, np.uint8)
    lead, words = sizes % 8, sizes // 8
    for j in range(int(lead.max(initial=0))):
        live = np.flatnonzero(same & (lead > j))
        same[live] = a_bytes[a_at[live] + j] == b_bytes[b_at[live] + j]
    if not int(words.max(initial=0)):
        return same
    a_words = np.ndarray((len(a) - 7,), "<u8", buffer=a, strides=(1,))
    b_words = np.ndarray((len(b) - 7,), "<u8", buffer=b, strides=(1,))
    a_at, b_at = a_at + lead, b_at + lead
    for j in range(int(words.max())):
        live = np.flatnonzero(same & (words > j))
        same[live] = a_words[a_at[live] + 8 * j] == b_words[b_at[live] + 8 * j]
    return same


def _same_keys(buf: Any, offsets: Any, sizes: Any) -> tuple[Any, Any, Any, Any] | None:
    """Per distinct key, the index of its first and of its last record, ordered by first;
    then the distinct hashes ascending and, per key in first order, its place among them.
    None when two keys' hashes collide (the streamed merge then does it): records of one
    hash (``key_hashes``) are compared byte by byte with its first."""
    import numpy as np

    n = len(offsets)
    if not n:
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(0, np.uint64), empty
    hashes = key_hashes(buf, offsets, sizes)
    order, ordered = _by_hash(hashes)
    del hashes
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    distinct = ordered[starts]
    del ordered
    ends = np.concatenate((starts[1:], [n])) - 1
    # Every record must equal the first of its hash group, byte for byte.
    leader = order[np.repeat(starts, np.diff(np.concatenate((starts, [n]))))]
    repeated = np.flatnonzero(leader != order)
    if len(repeated):
        mine, theirs = order[repeated], leader[repeated]
        mine_sizes = sizes[mine]
        if bool((mine_sizes != sizes[theirs]).any()):
            return None
        if not keys_equal(buf, offsets[mine], buf, offsets[theirs], mine_sizes).all():
            return None
    first = order[starts]
    by_first = _by_first(first, n)
    return first[by_first], order[ends][by_first], distinct, by_first


def _by_hash(hashes: Any) -> tuple[Any, Any]:
    """The records ordered by hash, those of one hash in file order: ``(order, hashes)``.

    numpy sorts values with SIMD but indices (``argsort``) several times slower, so each
    hash's high bits carry the record's index in its low bits and the values are sorted.
    Records whose high bits alone are equal (rare) are put in full-hash order after."""
    import numpy as np

    n = len(hashes)
    bits = max(1, n.bit_length())
    low = np.uint64((1 << bits) - 1)
    tagged = (hashes & ~low) | np.arange(n, dtype=np.uint64)
    tagged.sort()
    order = (tagged & low).astype(np.int64)
    del tagged
    ordered = hashes[order]
    # Within a run of equal high bits the full hashes must not interleave.
    prefix = ordered & ~low
    run_start = np.concatenate(([True], prefix[1:] != prefix[:-1]))
    mixed = ~run_start & np.concatenate(([False], ordered[1:] != ordered[:-1]))
    if bool(mixed.any()):
        run = np.cumsum(run_start) - 1
        at = np.flatnonzero(np.isin(run, run[mixed]))
        resorted = at[np.lexsort((order[at], ordered[at]))]
        order[at], ordered[at] = order[resorted], ordered[resorted]
    return order, ordered


def _by_first(first: Any, n: int) -> Any:
    """The order of ``first`` (distinct, below ``n``): the positions sorted by value."""
    import numpy as np

    bits = max(1, n.bit_length())
    if 2 * bits > 64:
        return np.argsort(first)
    # Each value carries its position in its low bits: a value sort, not an argsort.
    tagged = (first.astype(np.uint64) << np.uint64(bits)) | np.arange(len(first), dtype=np.uint64)
    tagged.sort()
    return (tagged & np.uint64((1 << bits) - 1)).astype(np.int64)
