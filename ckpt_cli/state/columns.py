"""Replay in columns: a store's records decoded in batches straight into Arrow
(``formats/unsaferow_arrow``), then the rows of ``rows.RowDecoder`` as Arrow tables and as
JSON lines, built column by column with numpy and pyarrow.compute instead of row by row.

The tables hold the row shape of ``RowDecoder.row`` with the same plain values (timestamps
ISO-8601, dates ISO, decimals and day-time intervals as text, binary as hex; every integer a
``int64``), their Arrow types derived from the state schema, so every batch of a replay has
the same types. The JSON lines are byte for byte ``RowDecoder.line``'s.

``columnar_for`` is the one place that chooses: a store whose schema has a map, a type
without a columnar decoder, or a decoder of another row shape (join sides, prefix-scan
keys) is replayed row by row; so is any batch the columnar path cannot vouch for (a row
``unsaferow_arrow`` refuses, a year outside 1-9999, a non-finite float in JSON), which the
row path then decodes or fails on with its own error.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from typing import TYPE_CHECKING, Any

from ckpt_cli.core import kernel
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.core.read import iter_state
from ckpt_cli.core.rebuild import ReplayPlan
from ckpt_cli.errors import FormatError
from ckpt_cli.formats import spark_types as S
from ckpt_cli.state.bulk import BATCH_ROWS, Packed, packed_batches
from ckpt_cli.state.ordered import in_order
from ckpt_cli.state.plain_arrow import (
    RowPath,
    concatenated,
    has_map,
    joined,
    json_parts,
    plain,
    plain_type,
)

if TYPE_CHECKING:
    from ckpt_cli.state.decoders import RowDecoder
    from ckpt_cli.state.reader import StateRows

# A batch of records: packed, or as (key, value) bytes.
Batch = Packed | Sequence[tuple[bytes, bytes]]


# False replays everything row by row (benchmarks compare the two paths).
ENABLED = True


def columnar_for(decoder: RowDecoder) -> Columnar | None:
    """The columnar replay of ``decoder``'s store, or None when it replays row by row."""
    from ckpt_cli.state.decoders import RowDecoder

    if not ENABLED or type(decoder) is not RowDecoder or decoder.schema is None:
        return None
    # One per decoder: its partitions share it, and the kernel's text sizes each batch by
    # the last one's rows (a batch outgrowing its room costs a copy).
    cached: Columnar | None = decoder.__dict__.get("_columnar")
    if cached is not None:
        return cached
    try:
        import numpy  # noqa: F401
        import pyarrow  # noqa: F401

        from ckpt_cli.formats.unsaferow_arrow import ColumnarUnsupported, check_supported
    except ImportError:
        return None
    try:
        check_supported(decoder.schema.key)
        check_supported(decoder.schema.value)
    except ColumnarUnsupported:
        return None
    if has_map(decoder.schema.key) or has_map(decoder.schema.value):
        return None  # a map's plain value is a dict keyed by str(key): the row path's
    columnar = decoder.__dict__["_columnar"] = Columnar(decoder)
    return columnar


def batches(
    pairs: Iterable[tuple[bytes, bytes | None]], size: int = BATCH_ROWS
) -> Iterator[Sequence[tuple[bytes, bytes | None]]]:
    it = iter(pairs)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


class Columnar:
    """Batches of one store's raw ``(key, value)`` records to Arrow tables and JSON lines."""

    def __init__(self, decoder: RowDecoder) -> None:
        import pyarrow as pa

        assert decoder.schema is not None
        self.decoder = decoder
        self.schema = decoder.schema
        self._rocks = decoder._rocks
        self.key_type = plain_type(self.schema.key)
        self.value_type = plain_type(self.schema.value)
        self.arrow_schema = pa.schema(
            [
                pa.field("partition_id", pa.int64()),
                pa.field("key", self.key_type),
                pa.field("value", self.value_type),
            ]
        )
        # Floats as today's JSON lines have them: repr from the generated encoder, else orjson.
        self._repr_floats = decoder.compiled
        # The compiled kernel's text of these rows (None: not built, or not for this schema).
        self.kernel = kernel.formatter(
            self.schema, rocks=self._rocks, repr_floats=self._repr_floats
        )

    # -- decoding ----------------------------------------------------------------------------

    def _decode(
        self, data: bytes | bytearray, offsets: Any, sizes: Any, schema: S.StructType
    ) -> Any:
        import numpy as np

        from ckpt_cli.formats.unsaferow_arrow import ColumnarUnsupported, decode_rows

        if self._rocks:
            # [00][row]: any other first byte is the row path's error.
            if len(offsets) and (
                bool((sizes < 1).any()) or np.frombuffer(data, np.uint8)[offsets].any()
            ):
                raise RowPath
            offsets, sizes = offsets + 1, sizes - 1
        try:
            return decode_rows(data, offsets, sizes, schema, path=self.decoder.path)
        except (FormatError, ColumnarUnsupported):
            raise RowPath from None

    def native(self, batch: Packed) -> tuple[Any, Any]:
        """The keys and values of a batch as Arrow struct arrays of their natural types."""
        value_sizes = batch.value_sizes
        if not self._rocks:
            value_sizes = value_sizes & ~7  # Spark < 2.3 appended 4 junk bytes to values
        key = self._decode(batch.data, batch.key_offsets, batch.key_sizes, self.schema.key)
        value = self._decode(batch.data, batch.value_offsets, value_sizes, self.schema.value)
        return key, value

    # -- Arrow tables ----------------------------------------------------------------------------

    def table(self, partition: int | Any, batch: Batch) -> Any:
        """One batch as a table of ``arrow_schema`` (the row path's rows when it must);
        ``partition`` is its partition, or an int64 array of each record's."""
        import numpy as np
        import pyarrow as pa

        packed = batch if isinstance(batch, Packed) else Packed.of(batch)
        each = (
            np.full(len(packed), partition, np.int64)
            if isinstance(partition, int)
            else np.ascontiguousarray(partition, np.int64)
        )
        # From the buffer: pa.array and pa.repeat import pandas where it is installed (0.25 s
        # at the first batch).
        ids = pa.Array.from_buffers(pa.int64(), len(each), [None, pa.py_buffer(each)])
        if self.kernel is not None:
            made = self.kernel.arrays(packed, self.key_type, self.value_type)
            if made is not None:
                return pa.Table.from_arrays([ids, *made], schema=self.arrow_schema)
        return self.reference_table(ids, packed)

    def reference_table(self, ids: Any, packed: Packed) -> Any:
        """``table`` by numpy and Arrow (the kernel's reference); ``ids``: each record's
        partition, an int64 array."""
        import pyarrow as pa

        try:
            key, value = self.native(packed)
            arrays = [ids, plain(key, self.schema.key), plain(value, self.schema.value)]
            return pa.Table.from_arrays(arrays, schema=self.arrow_schema)
        except RowPath:
            row = self.decoder.row
            pairs = packed.pairs()
            rows = [row(pid, k, v) for pid, (k, v) in zip(ids.to_pylist(), pairs, strict=False)]
            return pa.Table.from_pylist(rows, schema=self.arrow_schema)

    # -- JSON lines --------------------------------------------------------------------------

    def lines(self, partition: int, batch: Batch) -> str:
        """One batch as JSON lines, the text ``RowDecoder.line`` gives for each record."""
        return self.line_bytes(partition, batch).decode("utf-8")

    def line_bytes(self, partition: int, batch: Batch) -> bytes:
        """``lines`` as UTF-8 bytes: what is written, without decoding and encoding again."""
        packed = batch if isinstance(batch, Packed) else Packed.of(batch)
        if self.kernel is not None:
            text = self.kernel.jsonl(partition, packed)
            if text is not None:
                return text
        return self.reference_line_bytes(partition, packed)

    def reference_line_bytes(self, partition: int, packed: Packed) -> bytes:
        """``line_bytes`` by numpy and Arrow (the kernel's reference)."""
        schema, floats = self.schema, self._repr_floats
        try:
            key, value = self.native(packed)
            text = joined(
                [
                    f'{{"partition_id":{partition},"key":',
                    *json_parts(plain(key, schema.key), schema.key, floats),
                    ',"value":',
                    *json_parts(plain(value, schema.value), schema.value, floats),
                    "}\n",
                ],
                len(packed),
            )
        except RowPath:
            line = self.decoder.line
            return "".join(line(partition, k, v) for k, v in packed.pairs()).encode("utf-8")
        return concatenated(text) if len(text) else b""


# -- a partition's rows, a batch at a time -------------------------------------------------------


def line_chunks(
    ckpt: Checkpoint, plan: ReplayPlan, decoder: RowDecoder, limit: int | None = None
) -> Iterator[tuple[bytes, int]]:
    """A partition's JSON lines (unfiltered) as UTF-8, a batch at a time: ``(text, rows)``;
    at most ``limit`` rows."""
    for work in line_work(ckpt, plan, decoder, limit):
        yield work()


def line_work(
    ckpt: Checkpoint, plan: ReplayPlan, decoder: RowDecoder, limit: int | None = None
) -> Iterator[Callable[[], tuple[bytes, int]]]:
    """``line_chunks`` as work: the state is read and merged here, and each call formats
    one batch (in any thread)."""
    columnar = columnar_for(decoder)
    pid = plan.partition
    if columnar is None:
        with closing(iter_state(ckpt, plan)) as pairs:
            for chunk in batches(itertools.islice(pairs, limit)):
                yield functools.partial(_row_lines, decoder, pid, chunk)
        return
    size = kernel.TEXT_BATCH_ROWS if columnar.kernel is not None else None
    for batch in packed_batches(ckpt, plan, limit, size):
        yield functools.partial(_lines, columnar, pid, batch)


def _row_lines(
    decoder: RowDecoder, pid: int, chunk: Sequence[tuple[bytes, bytes | None]]
) -> tuple[bytes, int]:
    line = decoder.line
    text = "".join(line(pid, k, v) for k, v in chunk)  # type: ignore[arg-type]
    return text.encode("utf-8"), len(chunk)


def _lines(columnar: Columnar, pid: int, batch: Packed) -> tuple[bytes, int]:
    return columnar.line_bytes(pid, batch), len(batch)


def rows_columnar(rows: StateRows) -> Columnar | None:
    """The columnar decoder of ``rows`` when they are its store's state, whole (no change
    feed, state variable or key filter) and the schema decodes in columns; else None."""
    if rows.changes is None and rows.state_var is None and rows.matches is None:
        return columnar_for(rows.decoder)
    return None


def state_tables(
    rows: StateRows, limit: int | None = None, workers: int | None = None
) -> Iterator[Any]:
    """The rows as ``pyarrow.Table`` batches (at least one, empty when there are no rows):
    of the columnar schema when the store replays in columns, else ``arrow_tables``'s."""
    from ckpt_cli.state.decoders import arrow_tables

    columnar = rows_columnar(rows)
    if columnar is None:
        yield from arrow_tables(itertools.islice(rows, limit), rows.arrow_schema)
        return
    yield from plan_tables(rows.ckpt, rows.plans, columnar, limit, workers)


def plan_tables(
    ckpt: Checkpoint,
    plans: Sequence[ReplayPlan],
    columnar: Columnar,
    limit: int | None = None,
    workers: int | None = None,
) -> Iterator[Any]:
    """The state of the plans' partitions as tables of ``columnar.arrow_schema``, a batch at
    a time (at least one, empty when there are no rows); at most ``limit`` rows. Without a
    limit, up to ``workers`` partitions (default: one per core) decode side by side, their
    tables given in the order one thread gives them."""
    if limit is None:
        workers = workers or os.cpu_count() or 1
        # Sources of several partitions, their small batches decoded together; at least
        # four per worker so that the workers stay busy to the end.
        size = max(1, len(plans) if workers == 1 else -(-len(plans) // (4 * workers)))
        groups = [plans[i : i + size] for i in range(0, len(plans), size)]
        tables = in_order(
            [functools.partial(gathered_table_work, ckpt, group, columnar) for group in groups],
            workers,
        )
    else:
        tables = _limited_tables(ckpt, plans, columnar, limit)
    yield from at_least_one(tables, columnar)


def at_least_one(tables: Iterable[Any], columnar: Columnar) -> Iterator[Any]:
    """``tables``, or one empty table of ``columnar.arrow_schema`` when there are none (a
    parquet file of no rows still has the schema)."""
    sent = False
    for table in tables:
        yield table
        sent = True
    if not sent:
        yield columnar.arrow_schema.empty_table()


def table_work(
    ckpt: Checkpoint, plan: ReplayPlan, columnar: Columnar
) -> Iterator[Callable[[], Any]]:
    """A partition's state as work: read and merged here, each call makes the table of one
    batch (in any thread)."""
    for batch in packed_batches(ckpt, plan):
        yield functools.partial(columnar.table, plan.partition, batch)


def gathered_table_work(
    ckpt: Checkpoint, plans: Sequence[ReplayPlan], columnar: Columnar
) -> Iterator[Callable[[], Any]]:
    """``table_work`` of consecutive partitions. Without the compiled kernel, their batches
    of fewer than ``BATCH_ROWS`` records are gathered into one: a decode's fixed cost (some
    hundred numpy and Arrow calls) is then paid per ``BATCH_ROWS`` records, not per partition
    (200 partitions of 5,000 keys: NOTES, "Replay on 200 partitions")."""
    pending: list[tuple[int, Packed]] = []
    rows = 0
    # The compiled kernel's tables cost little each, so its batches are not copied together
    # (RocksDB at 1M keys to Parquet: 190 -> 155 MB peak, 10M: 3.0 -> 2.8 s of CPU).
    least = 1 if columnar.kernel is not None else BATCH_ROWS
    for plan in plans:
        for batch in packed_batches(ckpt, plan):
            if len(batch) >= least:
                if pending:
                    yield functools.partial(_gathered_table, columnar, pending)
                    pending, rows = [], 0
                yield functools.partial(columnar.table, plan.partition, batch)
                continue
            pending.append((plan.partition, batch))
            rows += len(batch)
            if rows >= BATCH_ROWS:
                yield functools.partial(_gathered_table, columnar, pending)
                pending, rows = [], 0
    if pending:
        yield functools.partial(_gathered_table, columnar, pending)


def _gathered_table(columnar: Columnar, batches: Sequence[tuple[int, Packed]]) -> Any:
    if len(batches) == 1:
        return columnar.table(*batches[0])
    import numpy as np

    packed = gather([batch for _, batch in batches])
    counts = [len(batch) for _, batch in batches]
    return columnar.table(np.repeat([pid for pid, _ in batches], counts), packed)


def gather(batches: Sequence[Packed]) -> Packed:
    """The records of ``batches`` as one batch: each one's bytes (the span its records use
    of its buffer, which may be a larger one's) copied one after another."""
    import numpy as np

    parts: list[Any] = []
    shifted: list[tuple[Any, Any]] = []
    at = 0
    for batch in batches:
        if not len(batch):
            continue
        ends = (batch.key_offsets + batch.key_sizes, batch.value_offsets + batch.value_sizes)
        low = int(min(batch.key_offsets.min(), batch.value_offsets.min()))
        high = int(max(ends[0].max(), ends[1].max()))
        parts.append(memoryview(batch.data)[low:high])
        shifted.append((batch.key_offsets + (at - low), batch.value_offsets + (at - low)))
        at += high - low
    if not parts:
        return batches[0]
    return Packed(
        b"".join(parts),
        np.concatenate([keys for keys, _ in shifted]),
        np.concatenate([batch.key_sizes for batch in batches if len(batch)]),
        np.concatenate([values for _, values in shifted]),
        np.concatenate([batch.value_sizes for batch in batches if len(batch)]),
    )


def _limited_tables(
    ckpt: Checkpoint, plans: Iterable[ReplayPlan], columnar: Columnar, limit: int
) -> Iterator[Any]:
    # One thread: partitions decoded ahead would mostly be cut.
    left = limit
    for plan in plans:
        for batch in packed_batches(ckpt, plan, left):
            yield columnar.table(plan.partition, batch)
            left -= len(batch)
        if left == 0:
            break
