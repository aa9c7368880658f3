"""Types of the compiled replay kernel (``_kernel.c``)."""

from collections.abc import Sequence
from typing import Protocol

from typing_extensions import Buffer

SOURCE: str
MAX_PROBE: int

class Column(Buffer):
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

class Merged:
    key_offsets: Column
    key_sizes: Column
    value_offsets: Column
    value_sizes: Column
    used: Column | None
    def __len__(self) -> int: ...
    def lookup(self, data: Buffer, offsets: Buffer, sizes: Buffer, /) -> Column: ...

class Format:
    def __new__(
        cls, key: tuple[object, ...], value: tuple[object, ...], rocks: bool, repr_floats: bool
    ) -> Format: ...
    jsonl: _RowsToText
    csv: _RowsToText
    def columns(
        self,
        data: Buffer,
        key_offsets: Buffer,
        key_sizes: Buffer,
        value_offsets: Buffer,
        value_sizes: Buffer,
        /,
    ) -> list[tuple[int, Column, Column | None, Column | None]] | None: ...

class _RowsToText(Protocol):
    """``Format.jsonl`` and ``Format.csv``: a batch's rows as text, None for the reference path."""
    def __call__(
        self,
        partition: int,
        data: Buffer,
        key_offsets: Buffer,
        key_sizes: Buffer,
        value_offsets: Buffer,
        value_sizes: Buffer,
        /,
    ) -> bytes | None: ...

def merge(
    data: Buffer, segments: Sequence[tuple[int, int, bool]], dedupe: bool, keep_removes: bool, /
) -> Merged | None: ...
def lz4_streams(
    files: Sequence[Buffer], ratio: float, floor: int, max_bytes: int, /
) -> tuple[bytes, list[int]] | None: ...
def sst_records(
    blocks: Buffer, sizes: Buffer, /
) -> tuple[bytes, Column, Column, Column, Column, Column, Column] | None: ...
def sst_run(
    data: Buffer, offsets: Buffer, sizes: Buffer, checksum_type: int, most: int, /
) -> tuple[bytes, Column, Column, Column, Column, Column, Column, int] | None: ...
def seed(a: int, b: int, /) -> None: ...
def _hash_bits(mask: int, /) -> None: ...
def float_text(x: float, style: int, /) -> str | None: ...
