from __future__ import annotations

import pytest

from ckpt_cli.errors import FormatError, UnsupportedVersionError
from ckpt_cli.formats import logs


def test_offsets_v1() -> None:
    data = (
        b'v1\n{"batchWatermarkMs":5,"batchTimestampMs":7,"conf":{"spark.sql.shuffle.partitions":"3"}}'
        b'\n{"logOffset":3}\n-'
    )
    seq = logs.parse_offsets("offsets/4", 4, data)
    assert seq.log_version == 1
    assert (seq.batch_watermark_ms, seq.batch_timestamp_ms) == (5, 7)
    assert seq.shuffle_partitions == 3
    assert seq.source_offsets == ('{"logOffset":3}', None)
    assert seq.source_ids is None


def test_offsets_empty_metadata_line_uses_defaults() -> None:
    seq = logs.parse_offsets("offsets/0", 0, b"v1\n\n5")
    assert seq.conf == {} and seq.batch_watermark_ms == 0 and seq.source_offsets == ("5",)


def test_offsets_v2_offset_map() -> None:
    seq = logs.parse_offsets("offsets/0", 0, b'v2\n{}\na:{"x":1}\nb:-')
    assert seq.source_ids == ("a", "b")
    assert seq.source_offsets == ('{"x":1}', None)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"", "empty file"),
        (b"{}", "expected a log version header"),
        (b"v1\n{broken", "line 2"),
        (b'v1\n{"conf":{"a":1}}', "conf must be"),
        (b'v1\n{"batchWatermarkMs":"x"}', "batchWatermarkMs must be an integer"),
        (b"v1\n{}\n{not json", "line 3"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_offsets_errors_name_file_and_problem(data: bytes, needle: str) -> None:
    with pytest.raises(FormatError) as info:
        logs.parse_offsets("offsets/9", 9, data)
    assert info.value.message.startswith("offsets/9")
    assert needle in info.value.message


def test_unknown_log_version() -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        logs.parse_offsets("offsets/1", 1, b"v99\n{}")
    assert "v99" in info.value.message and info.value.hint


def test_commit_v1_and_v2() -> None:
    c1 = logs.parse_commit("commits/0", 0, b'v1\n{"nextBatchWatermarkMs":0}')
    assert c1.log_version == 1 and c1.state_unique_ids is None
    c2 = logs.parse_commit(
        "commits/5",
        5,
        b'v2\n{"nextBatchWatermarkMs":12,"stateUniqueIds":{"0":[["a","b"],["c","d"]]}}',
    )
    assert c2.next_batch_watermark_ms == 12
    assert c2.state_unique_ids == {0: (("a", "b"), ("c", "d"))}
    # A missing second line means {} (Spark's reader does the same).
    assert logs.parse_commit("commits/1", 1, b"v1").next_batch_watermark_ms == 0


@pytest.mark.parametrize(
    "data",
    [
        b'v2\n{"stateUniqueIds":[1]}',
        b'v2\n{"stateUniqueIds":{"x":[]}}',
        b'v2\n{"stateUniqueIds":{"0":[[1]]}}',
    ],
)
def test_commit_bad_unique_ids(data: bytes) -> None:
    with pytest.raises(FormatError, match="commits/3"):
        logs.parse_commit("commits/3", 3, data)


def test_stream_metadata() -> None:
    assert logs.parse_stream_metadata("metadata", b'{"id":"abc"}').query_id == "abc"
    for bad in (b"", b"[]", b'{"id":1}', b"nope"):
        with pytest.raises(FormatError, match="^metadata"):
            logs.parse_stream_metadata("metadata", bad)


def test_operator_metadata() -> None:
    data = (
        b'v1\n{"operatorInfo":{"operatorId":0,"operatorName":"stateStoreSave"},'
        b'"stateStoreInfo":[{"storeName":"default","numColsPrefixKey":0,"numPartitions":2}]}'
    )
    meta = logs.parse_operator_metadata("state/0/_metadata/metadata", data)
    assert meta.operator_name == "stateStoreSave"
    assert meta.stores == (("default", 0, 2),)
    with pytest.raises(FormatError):
        logs.parse_operator_metadata("state/0/_metadata/metadata", b"v1\n[]")


# -- source logs -----------------------------------------------------------------------------


def test_file_source_log_reads_like_compactible_file_stream_log() -> None:
    from ckpt_cli.errors import TruncatedFileError

    entry = b'{"path":"file:///in/a.json","timestamp":5,"batchId":3}'
    # A trailing newline adds no entry (Source.getLines); \r\n ends a line too.
    got = logs.parse_file_source_log("s/3", b"v1\r\n" + entry + b"\n")
    assert got == (logs.FileSourceEntry("file:///in/a.json", 5, 3),)
    assert logs.parse_file_source_log("s/3", b"v1") == ()
    with pytest.raises(TruncatedFileError, match="line 2"):
        logs.parse_file_source_log("s/3", b"v1\n" + entry[:-9])
    with pytest.raises(FormatError, match="line 2") as exc:
        logs.parse_file_source_log("s/3", b"v1\n\n" + entry)  # an empty line fails json4s
    assert not isinstance(exc.value, TruncatedFileError)
    with pytest.raises(UnsupportedVersionError):
        logs.parse_file_source_log("s/3", b"v2\n" + entry)
    with pytest.raises(FormatError, match="batchId"):
        logs.parse_file_source_log("s/3", b'v1\n{"path":"p","timestamp":1}')


def test_file_source_offset_forms() -> None:
    assert logs.parse_file_source_offset("o", '{"logOffset":7}') == 7
    assert logs.parse_file_source_offset("o", "7") == 7  # Spark 2.0's bare number
    with pytest.raises(FormatError, match="logOffset"):
        logs.parse_file_source_offset("o", '{"logOffzet":7}')


def test_initial_offset_file_forms() -> None:
    assert logs.parse_source_initial_offset("k", b'\x00v1\n{"t":{"0":1}}') == '{"t":{"0":1}}'
    assert logs.parse_source_initial_offset("r", b"v1\n1795382210032") == "1795382210032"
    with pytest.raises(UnsupportedVersionError):
        logs.parse_source_initial_offset("k", b'\x00v9\n{"t":{"0":1}}')
    with pytest.raises(FormatError):
        logs.parse_source_initial_offset("k", b'\x00v1\n{"t":')
