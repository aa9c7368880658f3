from __future__ import annotations

import pytest

from ckpt_cli.formats.names import (
    StateFileType,
    hadoop_crc_name,
    parse_batch_name,
    parse_hadoop_crc_name,
    parse_spark_checksum_name,
    parse_state_file_name,
    parse_temp_name,
)

UUID = "0f1c2d3e-4a5b-6c7d-8e9f-0a1b2c3d4e5f"


def test_batch_names() -> None:
    assert parse_batch_name("0") == 0
    assert parse_batch_name("123") == 123
    for name in (".0.crc", "1.compact", "-1", "x", "", f".5.{UUID}.tmp"):
        assert parse_batch_name(name) is None


@pytest.mark.parametrize(
    ("name", "final"),
    [
        (f".5.{UUID}.tmp", "5"),
        (f".12.delta.{UUID}.TID734.tmp", "12.delta"),
        (f".3_{UUID}.zip.{UUID}.TID1.tmp", f"3_{UUID}.zip"),
        (f".metadata.{UUID}.tmp", "metadata"),
    ],
)
def test_temp_names(name: str, final: str) -> None:
    assert parse_temp_name(name) == final


def test_not_temp() -> None:
    assert parse_temp_name("5.tmp") is None
    assert parse_temp_name(".5.notauuid.tmp") is None


def test_hadoop_crc_names() -> None:
    assert parse_hadoop_crc_name(".1.delta.crc") == "1.delta"
    assert parse_hadoop_crc_name(f"..5.{UUID}.tmp.crc") == f".5.{UUID}.tmp"
    assert parse_hadoop_crc_name("1.delta.crc") is None
    for path, sidecar in [
        ("state/0/1/2.delta", "state/0/1/.2.delta.crc"),
        ("metadata", ".metadata.crc"),
        ("offsets/10", "offsets/.10.crc"),
    ]:
        assert hadoop_crc_name(path) == sidecar
        assert parse_hadoop_crc_name(sidecar.rpartition("/")[2]) == path.rpartition("/")[2]


@pytest.mark.parametrize(
    ("name", "version", "kind", "uid"),
    [
        ("1.delta", 1, StateFileType.DELTA, None),
        ("10.snapshot", 10, StateFileType.SNAPSHOT, None),
        ("7.SNAPSHOT", 7, StateFileType.SNAPSHOT, None),
        ("3.zip", 3, StateFileType.ZIP, None),
        ("4.changelog", 4, StateFileType.CHANGELOG, None),
        (f"6_{UUID}.zip", 6, StateFileType.ZIP, UUID),
        (f"6_{UUID}.changelog", 6, StateFileType.CHANGELOG, UUID),
    ],
)
def test_state_file_names(name: str, version: int, kind: StateFileType, uid: str | None) -> None:
    parsed = parse_state_file_name(name)
    assert parsed is not None
    assert (parsed.version, parsed.type, parsed.unique_id) == (version, kind, uid)


@pytest.mark.parametrize("name", ["1.delta.crc", "a.delta", "1.txt", "1.delta.bak", "1_.zip"])
def test_not_state_files(name: str) -> None:
    assert parse_state_file_name(name) is None


def test_spark_checksum_names() -> None:
    parsed = parse_spark_checksum_name(f"3_{UUID}.zip.crc")
    assert parsed is not None and parsed.version == 3 and parsed.unique_id == UUID
    assert parse_spark_checksum_name(".3.zip.crc") is None
