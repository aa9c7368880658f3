"""Rows as CSV through Arrow's own writer (``pyarrow.csv``), a batch at a time.

Every table is flattened the same way before Arrow writes it: struct columns become one column
per field, named with dots (``key.k``, ``value.a.b``; a null struct gives nulls), and the
columns Arrow's CSV writer cannot write (lists, maps) become compact JSON text, the text JSON
lines have for them (``plain_arrow.json_text``). The dialect is Arrow's: strings always quoted,
numbers and booleans (``true``/``false``) not, nulls as empty unquoted cells (an empty string is
``""``), lines ending in LF as Spark's CSV writer ends them. The header is written once, unquoted
as Spark writes it.

Where the rows have a known schema (a store's rows, its change feed) the tables have the types
of ``columns.Columnar.arrow_schema``: the columnar path gives them, and the row path builds them
from its rows with the same types, so both give the same bytes and even an empty state has its
header. Other rows (``--raw``, join sides, state variables and timers) are flattened as they
come, their header from the first batch of rows (no rows, no header).
"""

from __future__ import annotations

import contextlib
import csv
import functools
import io
import itertools
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

import orjson

from ckpt_cli.core import kernel
from ckpt_cli.errors import CkptError
from ckpt_cli.formats import spark_types as S
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.state import columns
from ckpt_cli.state.bulk import Packed, packed_batches
from ckpt_cli.state.decoders import ARROW_BATCH_ROWS, PrefixScanDecoder, RowDecoder, require_pyarrow
from ckpt_cli.state.ordered import utf8_writer, write_in_order
from ckpt_cli.state.plain_arrow import RowPath, has_map, json_text, plain_type
from ckpt_cli.state.reader import iter_rows

if TYPE_CHECKING:
    from ckpt_cli.core.model import Checkpoint
    from ckpt_cli.core.rebuild import ReplayPlan
    from ckpt_cli.state.reader import StateRows

_CHANGE_FIELDS = (("batch_id", "int64"), ("change_type", "string"))
# Map columns of rows without a schema: a transformWithState map variable read with
# flattenCollectionTypes=false (Spark's ``map_value`` column). Their keys vary by row.
_MAP_COLUMNS = frozenset({"map_value"})


@dataclass(frozen=True)
class CsvSchema:
    """The Arrow schema of a source's tables and the Spark type of each flattened column
    (what ``json_text`` needs to write a list as JSON lines do)."""

    arrow: Any
    spark_types: Mapping[str, S.DataType]
    repr_floats: bool

    def csv(self, table: Any) -> bytes:
        """The rows of ``table`` as CSV lines (no header)."""
        return _csv_bytes(_flat(table, self.spark_types, self.repr_floats))

    @functools.cached_property
    def header(self) -> list[str]:
        """The column names, from the schema alone (an empty state has them too)."""
        return list(
            _flat(self.arrow.empty_table(), self.spark_types, self.repr_floats).schema.names
        )


def write_csv(
    rows: StateRows,
    out: IO[str],
    *,
    limit: int | None = None,
    workers: int | None = None,
    progress: ProgressSink = NULL_PROGRESS,
) -> int:
    """``rows`` as CSV into ``out``; returns how many. The partitions of a store replayed in
    columns are decoded and written as CSV by up to ``workers`` threads (default: one per
    core), their bytes given in partition order."""
    require_pyarrow("--format csv")
    write = utf8_writer(out)
    schema = csv_schema(rows)
    if schema is None:
        return _write_untyped(rows, write, limit)
    write(_header(schema.header))
    if rows.changes is not None:
        return _write_batches(_tables_of(itertools.islice(rows, limit), schema), schema, write)
    columnar = columns.rows_columnar(rows)
    progress.start("Replaying partitions", total=len(rows.plans))
    try:
        if columnar is None:
            return _write_row_path(rows, schema, write, limit, progress)
        if limit is not None:
            tables = columns.plan_tables(rows.ckpt, rows.plans, columnar, limit)
            return _write_batches(tables, schema, write)
        sources = [
            functools.partial(_partition_csv, rows.ckpt, plan, columnar, schema)
            for plan in rows.plans
        ]
        return write_in_order(sources, out, workers or os.cpu_count() or 1, progress)
    finally:
        progress.close()


def csv_schema(rows: StateRows) -> CsvSchema | None:
    """The schema of ``rows`` as tables of plain values, or None when their shape is not the
    store schema's (raw hex, a join side, a state variable, no schema file)."""
    if rows.state_var is not None:
        return None
    return schema_of(rows.decoder, changes=rows.changes is not None)


def schema_of(decoder: RowDecoder, *, changes: bool = False) -> CsvSchema | None:
    """The schema of ``decoder``'s rows (with ``changes``, of its change feed rows) as tables
    of plain values, or None when its rows are not in the store schema's shape."""
    import pyarrow as pa

    if type(decoder) not in (RowDecoder, PrefixScanDecoder) or decoder.schema is None:
        return None
    key, value = decoder.schema.key, decoder.schema.value
    fields = [pa.field(name, kind) for name, kind in _CHANGE_FIELDS] if changes else []
    fields += [
        pa.field("partition_id", pa.int64()),
        pa.field("key", plain_type(key)),
        pa.field("value", plain_type(value)),
    ]
    types = {**_spark_types("key", key), **_spark_types("value", value)}
    return CsvSchema(pa.schema(fields), types, decoder.compiled)


def _spark_types(prefix: str, t: S.DataType) -> dict[str, S.DataType]:
    """The Spark type of each column ``prefix`` flattens to."""
    while isinstance(t, S.UserDefinedType):
        t = t.sql_type
    if not isinstance(t, S.StructType):
        return {prefix: t}
    out: dict[str, S.DataType] = {}
    for name, f in zip(t.unique_names(), t.fields, strict=True):
        out.update(_spark_types(f"{prefix}.{name}", f.data_type))
    return out


# -- the sources of tables ---------------------------------------------------------------------


def _partition_csv(
    ckpt: Checkpoint, plan: ReplayPlan, columnar: columns.Columnar, schema: CsvSchema
) -> Iterator[Callable[[], tuple[bytes, int]]]:
    """One partition's CSV lines as work: each call makes one batch's (in any thread)."""
    fmt = columnar.kernel
    size = kernel.TEXT_BATCH_ROWS if fmt is not None and fmt.writes_csv else None
    for batch in packed_batches(ckpt, plan, size=size):
        yield functools.partial(_batch_csv, columnar, plan.partition, batch, schema)


def _batch_csv(
    columnar: columns.Columnar, partition: int, batch: Packed, schema: CsvSchema
) -> tuple[bytes, int]:
    """A batch's CSV lines: the compiled kernel's, else Arrow's writer's from its table."""
    if columnar.kernel is not None:
        text = columnar.kernel.csv(partition, batch)
        if text is not None:
            return text, len(batch)
    table = columnar.table(partition, batch)
    return schema.csv(table), table.num_rows


def _write_row_path(
    rows: StateRows,
    schema: CsvSchema,
    write: Callable[[bytes], Any],
    limit: int | None,
    progress: ProgressSink,
) -> int:
    """A store's rows decoded row by row (``--where``, or no columnar decoder), read into
    the columnar path's Arrow types a batch at a time."""
    count = 0
    for plan in rows.plans:
        left = None if limit is None else limit - count
        plan_rows = itertools.islice(iter_rows(rows.ckpt, plan, rows.decoder, rows.matches), left)
        count += _write_batches(_tables_of(plan_rows, schema), schema, write)
        progress.advance()
        if limit is not None and count >= limit:
            break
    return count


def _tables_of(rows: Iterable[dict[str, Any]], schema: CsvSchema) -> Iterator[Any]:
    import pyarrow as pa

    it = iter(rows)
    while batch := list(itertools.islice(it, ARROW_BATCH_ROWS)):
        try:
            yield pa.Table.from_pylist(batch, schema=schema.arrow)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            # The row path writes non-finite floats as text ("nan"): floats again here.
            restored = [_floats_restored(row, pa.struct(schema.arrow)) for row in batch]
            yield pa.Table.from_pylist(restored, schema=schema.arrow)


def _floats_restored(value: Any, t: Any) -> Any:
    """A row path value with the text of its non-finite floats (type ``t``) as floats."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_floating(t) and isinstance(value, str):
        return float(value)
    if pa.types.is_struct(t):
        return {f.name: _floats_restored(value.get(f.name), f.type) for f in t}
    if pa.types.is_map(t):
        return {k: _floats_restored(v, t.item_type) for k, v in value.items()}
    if pa.types.is_list(t):
        return [_floats_restored(v, t.value_type) for v in value]
    return value


def _write_batches(tables: Iterable[Any], schema: CsvSchema, write: Callable[[bytes], Any]) -> int:
    count = 0
    for table in tables:
        write(schema.csv(table))
        count += table.num_rows
    return count


# -- flattening --------------------------------------------------------------------------------


def _flat(table: Any, spark_types: Mapping[str, S.DataType], repr_floats: bool) -> Any:
    """``table`` with struct columns flattened to dotted names (a null struct's fields null)
    and every column Arrow's CSV writer cannot write as JSON text."""
    import pyarrow as pa

    while any(pa.types.is_struct(f.type) for f in table.schema):
        table = table.flatten()
    for i, field in enumerate(table.schema):
        if not _writable(field.type):
            column = table.column(i).combine_chunks()
            text = _json_cells(column, spark_types.get(field.name), repr_floats)
            table = table.set_column(i, field.name, text)
    return table


def _writable(t: Any) -> bool:
    import pyarrow as pa

    return bool(
        pa.types.is_boolean(t)
        or pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_null(t)
    )


def _json_cells(array: Any, spark_type: S.DataType | None, repr_floats: bool) -> Any:
    """Each value of ``array`` as the compact JSON text JSON lines have for it; null stays
    null (an empty cell, where ``json_text`` gives ``null``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = None
    if spark_type is not None and not has_map(spark_type):
        # Non-finite floats raise RowPath: their text as the row path writes them, below.
        with contextlib.suppress(RowPath):
            text = json_text(array, spark_type, repr_floats)
    if text is None:
        values = array.to_pylist()
        text = pa.array([orjson.dumps(_plain(v, array.type)).decode() for v in values], pa.string())
    if array.null_count:
        text = pc.if_else(pc.is_valid(array), text, pa.scalar(None, pa.string()))
    return text


def _plain(value: Any, t: Any) -> Any:
    """A value of Arrow type ``t`` (from ``to_pylist``) as the row path's plain JSON value:
    a map as an object, a non-finite float as text."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_map(t):
        return {str(k): _plain(v, t.item_type) for k, v in value}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_plain(v, t.value_type) for v in value]
    if pa.types.is_struct(t):
        return {f.name: _plain(value[f.name], f.type) for f in t}
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _csv_bytes(table: Any) -> bytes:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    if not table.num_rows:
        return b""
    sink = pa.BufferOutputStream()
    pcsv.write_csv(table, sink, pcsv.WriteOptions(include_header=False))
    return bytes(sink.getvalue())


def _header(names: list[str]) -> bytes:
    """Column names as Spark's CSV writer gives them: quoted only where they must be."""
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerow(names)
    return text.getvalue().encode()


# -- rows of other shapes ------------------------------------------------------------------------


def _write_untyped(
    rows: Iterable[dict[str, Any]], write: Callable[[bytes], Any], limit: int | None
) -> int:
    """Rows without a known schema: flattened as they come (dicts to dotted names, lists as
    JSON text), the columns of the first batch, each column's type inferred per batch."""
    import pyarrow as pa

    it = itertools.islice(rows, limit)
    names: list[str] | None = None
    count = 0
    while batch := [_flat_row(row) for row in itertools.islice(it, ARROW_BATCH_ROWS)]:
        if names is None:
            names = _columns_of(batch)
            write(_header(names))
        _check_columns(batch, names, count)
        arrays = [_untyped_column([row.get(n) for row in batch]) for n in names]
        write(_csv_bytes(pa.Table.from_arrays(arrays, names=names)))
        count += len(batch)
    return count


def _flat_row(row: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in row.items():
        _flatten(name, value, out)
    return out


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and prefix not in _MAP_COLUMNS:
        for k, v in value.items():
            _flatten(f"{prefix}.{k}", v, out)
    elif isinstance(value, (list, dict)):
        out[prefix] = orjson.dumps(value).decode()
    else:
        out[prefix] = value


def _columns_of(batch: list[dict[str, Any]]) -> list[str]:
    """The columns of a batch's rows, in order: a null struct (a deleted row's value) is the
    columns its other rows have for it."""
    seen = dict.fromkeys(name for row in batch for name in row)
    return [n for n in seen if not any(m.startswith(f"{n}.") for m in seen)]


def _check_columns(batch: list[dict[str, Any]], names: list[str], before: int) -> None:
    """Every row has the header's columns, or a cell would be lost (a null struct, e.g. a
    deleted row's value, is its columns' nulls)."""
    known = set(names)
    structs = {name.rsplit(".", i)[0] for name in names for i in range(1, name.count(".") + 1)}
    for i, row in enumerate(batch):
        for extra in row.keys() - known:
            if row[extra] is None and extra in structs:
                continue
            raise CkptError(
                f"row {before + i + 1} has a column the CSV header lacks ({extra!r}): "
                "its rows differ in shape; use --format jsonl or parquet"
            )


def _untyped_column(values: list[Any]) -> Any:
    import pyarrow as pa

    try:
        array = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        array = None
    if array is None or not _writable(array.type):  # mixed types: each value as text
        array = pa.array([None if v is None else _text(v) for v in values], pa.string())
    return array


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)
