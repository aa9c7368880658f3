"""``formats/parquet_footer``: footers Arrow writes read and written back to the same bytes,
every Thrift compact type, hostile footers refused in one error, and splices that refuse
what they cannot move."""

from __future__ import annotations

import io
import random
from typing import Any

import pytest

from ckpt_cli.formats import parquet_footer as pf
from ckpt_cli.formats.parquet_footer import Field, FooterError, Placed

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _table(rows: int, seed: int = 0) -> Any:
    rng = random.Random(seed)
    return pa.table(
        {
            "partition_id": pa.array([i % 5 for i in range(rows)], pa.int64()),
            "key": pa.array(
                [{"k": f"key-{i}", "n": i} for i in range(rows)],
                pa.struct([("k", pa.string()), ("n", pa.int32())]),
            ),
            "value": pa.array(
                [
                    None
                    if i % 11 == 0
                    else {
                        "d": rng.random(),
                        "b": bool(i % 2),
                        "l": [rng.randrange(9) for _ in range(i % 4)],
                        "m": {"a": i} if i % 3 else None,
                        "t": "2024-01-01T00:00:00Z" if i % 2 else None,
                        "raw": bytes([i % 256]) * (i % 3),
                    }
                    for i in range(rows)
                ],
                pa.struct(
                    [
                        ("d", pa.float64()),
                        ("b", pa.bool_()),
                        ("l", pa.list_(pa.int16())),
                        ("m", pa.map_(pa.string(), pa.int64())),
                        ("t", pa.string()),
                        ("raw", pa.binary()),
                    ]
                ),
            ),
        }
    )


def _file(table: Any, group_rows: int, **options: Any) -> bytes:
    out = io.BytesIO()
    with pq.ParquetWriter(out, table.schema, **options) as writer:
        for start in range(0, max(table.num_rows, 1), group_rows):
            writer.write_table(table.slice(start, group_rows), row_group_size=group_rows)
    return out.getvalue()


@pytest.mark.parametrize(
    ("rows", "group_rows", "options"),
    [
        (0, 10, {}),
        (1, 10, {}),
        (500, 7, {}),  # 72 row groups: the long form of a list's size
        (3000, 1000, {"compression": "zstd", "write_statistics": False}),
        (3000, 1000, {"use_dictionary": False, "dictionary_pagesize_limit": 64}),
        (2000, 2000, {"compression": "none", "data_page_size": 512}),
    ],
)
def test_an_arrow_footer_is_written_back_to_its_own_bytes(
    rows: int, group_rows: int, options: dict[str, Any]
) -> None:
    footer = pf.footer_of(_file(_table(rows), group_rows, **options))
    assert pf.write_struct(pf.read_struct(footer)) == footer


def test_every_compact_type_round_trips() -> None:
    inner = [Field(1, pf._I32, -3), Field(40, pf._BINARY, b"x" * 200)]
    fields = [
        Field(1, pf._TRUE, True),
        Field(2, pf._FALSE, False),
        Field(3, pf._BYTE, -128),
        Field(4, pf._I16, -32768),
        Field(5, pf._I32, 2**31 - 1),
        Field(6, pf._I64, -(2**63)),
        Field(7, pf._DOUBLE, -1.5),
        Field(8, pf._BINARY, b""),
        Field(9, pf._LIST, (pf._BYTE, [1, -1, 0])),
        Field(10, pf._SET, (pf._I64, list(range(-20, 20)))),  # 40: the long form of a size
        Field(11, pf._MAP, (pf._BINARY, pf._STRUCT, [(b"a", inner), (b"b", [])])),
        Field(12, pf._MAP, (0, 0, [])),
        Field(13, pf._LIST, (pf._TRUE, [True, False, True])),
        Field(14, pf._LIST, (pf._I32, list(range(14)))),  # sizes 14-16 about the long form
        Field(15, pf._LIST, (pf._I32, list(range(15)))),
        Field(16, pf._SET, (pf._I32, list(range(16)))),
        Field(30, pf._STRUCT, inner),  # a jump of 18: a field id written in full
        Field(29, pf._I32, 7),  # a field id below the last one: also in full
        Field(32000, pf._LIST, (pf._STRUCT, [inner, inner])),
    ]
    data = pf.write_struct(fields)
    assert pf.read_struct(data) == fields
    assert pf.write_struct(pf.read_struct(data)) == data


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"", "ends inside"),
        (b"\x15", "ends inside"),  # an i32 field, no value
        (b"\x18\x05ab", "ends inside"),  # 5 bytes declared, 2 there
        (b"\x19\xf5\xff\xff\xff\x0f", "elements in fewer bytes"),  # a list of 4G i32s
        (b"\x1b\xff\xff\xff\xff\x0f\x55", "elements in fewer bytes"),
        (b"\x15" + b"\xff" * 11, "longer than 10 bytes"),
        (b"\x1d", "unknown Thrift type 13"),
        (b"\x1c" * 200, "nests deeper"),
        (b"\x15\x02\x00\x00", "1 bytes after"),
    ],
)
def test_a_hostile_footer_is_one_error(data: bytes, said: str) -> None:
    with pytest.raises(FooterError, match=said):
        pf.read_struct(data)


def test_random_bytes_are_a_footer_or_one_error() -> None:
    rng = random.Random(5)
    footer = pf.footer_of(_file(_table(300), 50))
    for _ in range(400):
        data = bytearray(footer)
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        cut = bytes(data[: rng.randrange(len(data) + 1)] if rng.random() < 0.3 else data)
        try:
            fields = pf.read_struct(cut)
        except FooterError:
            continue
        pf.write_struct(fields)  # whatever reads also writes


def test_footer_of_needs_the_magic_and_a_length_that_fits() -> None:
    with pytest.raises(FooterError, match="no PAR1"):
        pf.footer_of(b"PAR1....")
    with pytest.raises(FooterError, match="a footer of"):
        pf.footer_of(b"\xff\x00\x00\x00PAR1")


def _two_writers(table: Any, **options: Any) -> tuple[list[bytes], list[Placed], bytes]:
    """Halves of ``table`` by two writers; (their footers, the halves placed one after the
    other, the file's body)."""
    footers, placed, body = [], [], bytearray(pf.MAGIC)
    for part, half in enumerate((table.slice(0, 50), table.slice(50))):
        data = _file(half, 50, **options)
        footer = pf.footer_of(data)
        end = len(data) - len(footer) - 8
        placed.append(Placed(part, 0, 4, end, len(body)))
        body += data[4:end]
        footers.append(footer)
    return footers, placed, bytes(body)


def test_a_splice_is_the_file_one_writer_makes() -> None:
    table = _table(100)
    footers, placed, body = _two_writers(table)
    footer = pf.spliced_footer(footers, placed)
    spliced = body + footer + len(footer).to_bytes(4, "little") + pf.MAGIC
    assert spliced == _file(table, 50)
    assert pq.read_table(io.BytesIO(spliced)).equals(table)


def test_a_splice_refuses_what_it_cannot_move() -> None:
    table = _table(100)
    footers, placed, _ = _two_writers(table, write_page_index=True)
    with pytest.raises(FooterError, match="offset index"):
        pf.spliced_footer(footers, placed)
    footers, placed, _ = _two_writers(table)
    with pytest.raises(FooterError, match="not the writers' row groups"):
        pf.spliced_footer(footers, placed[:1])
    with pytest.raises(FooterError, match="not the writers' row groups"):
        pf.spliced_footer(footers, [placed[0], placed[0]])
    short = [Placed(p.part, p.index, p.start, p.start + 10, p.at) for p in placed]
    with pytest.raises(FooterError, match="outside its row group's bytes"):
        pf.spliced_footer(footers, short)
    other = pf.footer_of(_file(table.drop_columns(["value"]).slice(50), 50))
    with pytest.raises(FooterError, match="differs from the first's"):
        pf.spliced_footer([footers[0], other], placed)


def test_a_column_chunks_file_offset_moves_with_its_pages() -> None:
    """Arrow writes a column chunk's file_offset as 0 (unset), other writers as its first
    page: that one moves with the pages, and 0 stays 0. A row group's ordinal, which Arrow
    does not write either, is its place in the file."""
    table = _table(100)
    footers, placed, _ = _two_writers(table)
    edited = []
    for footer in footers:
        meta = pf.read_struct(footer)
        groups = pf._field(meta, pf._ROW_GROUPS)
        assert groups is not None
        for group in groups.value[1]:
            assert pf._field(group, pf._ORDINAL) is None  # Arrow writes none: one to renumber
            group.append(Field(pf._ORDINAL, pf._I16, 5))
            columns = pf._field(group, pf._COLUMNS)
            assert columns is not None
            for chunk in columns.value[1][:2]:  # the others keep 0
                offset = pf._field(chunk, pf._CC_FILE_OFFSET)
                chunk_meta = pf._field(chunk, pf._META_DATA)
                assert offset is not None and offset.value == 0 and chunk_meta is not None
                offset.value = pf._field(chunk_meta.value, pf._DATA_PAGE).value  # type: ignore[union-attr]
        edited.append(pf.write_struct(meta))
    spliced = pf.read_struct(pf.spliced_footer(edited, placed))
    groups = pf._field(spliced, pf._ROW_GROUPS)
    assert groups is not None and len(groups.value[1]) == 2
    ordinals = [pf._field(group, pf._ORDINAL).value for group in groups.value[1]]  # type: ignore[union-attr]
    assert ordinals == [0, 1]
    assert pf._int(spliced, pf._NUM_ROWS) == table.num_rows
    for group, where in zip(groups.value[1], placed, strict=True):
        columns = pf._field(group, pf._COLUMNS)
        assert columns is not None
        offsets, pages = [], []
        for chunk in columns.value[1]:
            chunk_meta = pf._field(chunk, pf._META_DATA)
            pages.append(pf._field(chunk_meta.value, pf._DATA_PAGE).value)  # type: ignore[union-attr]
            offsets.append(pf._field(chunk, pf._CC_FILE_OFFSET).value)  # type: ignore[union-attr]
        assert offsets == pages[:2] + [0] * (len(pages) - 2)
        assert where.at <= min(pages)  # where this writer's row group landed
