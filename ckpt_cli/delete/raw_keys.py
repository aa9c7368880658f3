"""``--keys`` matched by their stored bytes: each key of the file encoded once as the
UnsafeRow Spark stores (``formats.unsaferow.flat_row_encoder``), and the state's records,
merged as replay merges them (``state.bulk.packed_batches``, the compiled kernel where it is
built), looked up by their raw keys; only the matched records are decoded. A deletion of a
list of keys (an erasure request) then costs what reading the state costs.

The encoding is checked against the state itself: in each partition, keys of the state are
decoded and encoded again, and where one does not come back byte for byte (another layout,
a prefix other than the first key's), the partition is matched the way every other
selection is, by decoding every key.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ckpt_cli.core import kernel
from ckpt_cli.state.bulk import Packed

# Keys of each partition decoded and encoded again before its raw keys are trusted.
CHECKED_KEYS = 64

_INT = struct.Struct(">i")


class RawKeys:
    """The keys of a ``--keys`` file as their encoded rows (without the prefix a store puts
    before them, learned from the state)."""

    def __init__(self, keys: Sequence[Any], encode: Callable[[Any], bytes | None]) -> None:
        self.encode = encode
        rows = (encode(k) for k in keys)
        self.rows = sorted({r for r in rows if r is not None})

    def prefix(self, batch: Packed, json_key: Callable[[bytes], Any]) -> bytes | None:
        """The bytes before the row in every stored key, when the first ``CHECKED_KEYS``
        of ``batch`` decode and encode back to themselves after them; else None."""
        pairs = batch.pairs()[:CHECKED_KEYS]
        prefix = None
        for raw, _ in pairs:
            row = self.encode(json_key(raw))
            if row is None or not raw.endswith(row):
                return None
            head = raw[: len(raw) - len(row)]
            if prefix is None:
                prefix = head
            elif head != prefix:
                return None
        return prefix

    def finder(self, prefix: bytes) -> Callable[[Packed], Iterator[int]]:
        """Per batch, the indexes of its records whose key is one of the keys."""
        wanted = [prefix + row for row in self.rows]
        table = _kernel_table(wanted) if kernel.load() is not None and wanted else None
        if table is not None:
            import numpy as np

            def in_kernel(batch: Packed) -> Iterator[int]:
                found = table.lookup(batch.data, batch.key_offsets, batch.key_sizes)
                yield from np.flatnonzero(np.frombuffer(found, np.int64) >= 0).tolist()

            return in_kernel
        keys = set(wanted)

        def in_python(batch: Packed) -> Iterator[int]:
            data = memoryview(batch.data)
            offsets, sizes = batch.key_offsets.tolist(), batch.key_sizes.tolist()
            for i, (at, size) in enumerate(zip(offsets, sizes, strict=True)):
                if data[at : at + size].tobytes() in keys:
                    yield i

        return in_python


def _kernel_table(keys: list[bytes]) -> Any:
    """The kernel's merged table of ``keys`` (framed as a delta's records, empty values),
    whose ``lookup`` finds a batch's keys among them; None when the kernel hands it back."""
    framed = bytearray()
    for key in keys:
        framed += _INT.pack(len(key)) + key + _INT.pack(0)
    framed += _INT.pack(-1)
    return kernel.merge(framed, [(0, len(framed), False)], dedupe=True, removes=True)
