"""One Parquet file whose row groups are encoded on several threads.

Arrow's writer encodes a file on one thread: at 10M keys that was 1.2-1.5 s of CPU beside
the threads that decode. Each encoder here is a writer of its own, on a thread of its own,
writing some of the row groups into memory; they are written to the file in order, and one
footer (``formats/parquet_footer``) lists them where they landed. A row group's bytes do
not depend on which writer encoded it, so the file is the one a single writer makes, byte
for byte (``tests/test_parquet_file.py``).
"""

from __future__ import annotations

import io
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, BinaryIO

from ckpt_cli.formats import parquet_footer
from ckpt_cli.formats.parquet_footer import MAGIC, Placed


class _Chunks(io.RawIOBase):
    """A writer's sink: what it writes, until taken."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.position = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self.parts.append(chunk)
        self.position += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self.position

    def take(self) -> bytes:
        out = b"".join(self.parts)
        self.parts.clear()
        return out


class _Encoder:
    """A Parquet writer confined to one thread: every call to it runs there."""

    def __init__(self, index: int, schema: Any, options: dict[str, Any]) -> None:
        self.index = index
        self.groups = 0  # row groups handed to the file so far
        self.thread = ThreadPoolExecutor(1, thread_name_prefix=f"ckpt-parquet-{index}")
        self.sink = _Chunks()
        self.writer: Any = None
        self.opened = self.thread.submit(self._open, schema, options)

    def _open(self, schema: Any, options: dict[str, Any]) -> None:
        import pyarrow.parquet as pq

        self.writer = pq.ParquetWriter(self.sink, schema, **options)
        self.sink.take()  # the magic the file already has

    def encode(self, table: Any, rows: int) -> Future[tuple[int, int, bytes]]:
        return self.thread.submit(self._encode, table, rows)

    def _encode(self, table: Any, rows: int) -> tuple[int, int, bytes]:
        # One row group per table: the file's row groups are the tables it was given.
        self.writer.write_table(table, row_group_size=rows or None)
        data = self.sink.take()
        return self.sink.position - len(data), self.sink.position, data

    def footer(self) -> bytes:
        def close() -> bytes:
            self.writer.close()
            return parquet_footer.footer_of(self.sink.take())

        return self.thread.submit(close).result()

    def abandon(self) -> None:
        self.thread.shutdown(wait=True, cancel_futures=True)


# The first row groups are encoded one at a time, as by a single writer: a state of
# up to a million rows or so (8 row groups of 128k) keeps one writer's memory and speed
# (more encoders cost 30-40 MB there and saved no time); past them every encoder takes some.
SERIAL_ROW_GROUPS = 8


class ParquetFile:
    """Tables of one schema as the row groups of one Parquet file written to ``out``: the
    first ``SERIAL_ROW_GROUPS`` encoded one at a time, the others by ``encoders`` writers
    in turn, one row group each at most. ``options`` are ``pyarrow.parquet.ParquetWriter``'s."""

    def __init__(self, out: BinaryIO, schema: Any, encoders: int, **options: Any) -> None:
        if encoders < 1:
            raise ValueError(f"encoders must be at least 1, not {encoders}")
        self.out = out
        self.schema = schema
        self.wanted = encoders
        # A page index's pages would be offsets the splice cannot move (pyarrow's default).
        self.options = {**options, "write_page_index": False}
        self.encoders: list[_Encoder] = []
        self.inflight: deque[tuple[_Encoder, Future[tuple[int, int, bytes]]]] = deque()
        self.placed: list[Placed] = []
        self.sent = 0
        self._start_encoder()
        out.write(MAGIC)
        self.position = len(MAGIC)

    def _start_encoder(self) -> None:
        encoder = _Encoder(len(self.encoders), self.schema, self.options)
        self.encoders.append(encoder)
        try:
            encoder.opened.result()  # bad options: the writer's own error, here
        except BaseException:
            self.abandon()
            raise

    def write_table(self, table: Any, row_group_size: int | None = None) -> None:
        """``table`` as the file's next row group (``row_group_size``, as pyarrow's
        ``ParquetWriter`` takes it: None, or at least the table's rows)."""
        rows = row_group_size or 0
        if rows and rows < table.num_rows:
            raise ValueError(f"{table.num_rows} rows are more than one row group of {rows}")
        if not table.schema.equals(self.schema):
            raise ValueError(
                "Table schema does not match schema used to create file:\n"
                f"table:\n{table.schema} vs. \nfile:\n{self.schema}"
            )
        if self.sent < SERIAL_ROW_GROUPS:
            encoder, depth = self.encoders[0], 0  # written before the next is gathered
        else:
            while len(self.encoders) < self.wanted:
                self._start_encoder()
            encoder = self.encoders[(self.sent - SERIAL_ROW_GROUPS) % self.wanted]
            depth = self.wanted
        self.sent += 1
        self.inflight.append((encoder, encoder.encode(table, rows)))
        while len(self.inflight) > depth:
            self._write_next()

    def _write_next(self) -> None:
        encoder, done = self.inflight.popleft()
        start, end, data = done.result()
        self.placed.append(Placed(encoder.index, encoder.groups, start, end, self.position))
        encoder.groups += 1
        self.out.write(data)
        self.position += len(data)

    def close(self) -> None:
        """The row groups still in flight, then the footer."""
        try:
            while self.inflight:
                self._write_next()
            footers = [encoder.footer() for encoder in self.encoders]
            footer = parquet_footer.spliced_footer(footers, self.placed)
            self.out.write(footer + len(footer).to_bytes(4, "little") + MAGIC)
        finally:
            self.abandon()

    def abandon(self) -> None:
        """Stops every encoder (row groups not begun are dropped); the file is incomplete."""
        for encoder in self.encoders:
            encoder.abandon()
        self.inflight.clear()
