"""``sinks.write_tables``: small tables gathered into row groups, dictionaries kept small."""

from __future__ import annotations

import io
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from ckpt_cli.replay import sinks  # noqa: E402


def _tables(count: int, rows: int) -> list[Any]:
    return [
        pa.table(
            {
                "partition_id": pa.array([i % 3] * rows, pa.int64()),
                "key": pa.array([f"key-{i}-{j}" for j in range(rows)]),
            }
        )
        for i in range(count)
    ]


def _written(tables: list[Any]) -> tuple[int, Any]:
    out = io.BytesIO()
    count = sinks.write_tables(tables, out)
    return count, pq.ParquetFile(io.BytesIO(out.getvalue()))


def test_small_tables_are_gathered_into_row_groups() -> None:
    tables = _tables(40, 10_000)
    count, parquet = _written(tables)
    assert count == 400_000
    # 14 tables reach ROW_GROUP_ROWS (131,072): 140k, 140k, then the last 120k.
    sizes = [parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)]
    assert sizes == [140_000, 140_000, 120_000]
    assert parquet.read().equals(pa.concat_tables(tables))


def test_a_row_group_also_ends_at_its_byte_size(monkeypatch: pytest.MonkeyPatch) -> None:
    tables = _tables(6, 1000)
    monkeypatch.setattr(sinks, "ROW_GROUP_BYTES", tables[0].nbytes * 2)
    _, parquet = _written(tables)
    assert parquet.num_row_groups == 3
    assert parquet.read().equals(pa.concat_tables(tables))


def test_no_rows_is_a_file_of_the_schema() -> None:
    empty = _tables(1, 0)
    count, parquet = _written(empty)
    assert count == 0
    assert parquet.read().equals(empty[0])


def test_a_table_of_another_schema_is_the_writers_error() -> None:
    tables = _tables(2, 10)
    other = pa.table({"partition_id": pa.array([1], pa.int64())})
    with pytest.raises(ValueError, match="schema"):
        _written([*tables, other])


def test_a_column_of_distinct_values_gives_up_its_dictionary_early() -> None:
    """A 64 KiB dictionary page, not the writer's default 1 MiB: the dictionary of distinct
    keys is abandoned early, and a column of few values keeps one."""
    _, parquet = _written(_tables(1, 100_000))
    group = parquet.metadata.row_group(0)
    key, partition = group.column(1), group.column(0)
    assert key.dictionary_page_offset is not None
    dictionary_bytes = key.data_page_offset - key.dictionary_page_offset
    assert 0 < dictionary_bytes <= 2 * sinks.DICTIONARY_PAGE_BYTES
    assert "PLAIN" in key.encodings  # fell back after the dictionary filled
    assert "RLE_DICTIONARY" in partition.encodings
