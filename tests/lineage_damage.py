"""Damage a format-v2 changelog's lineage line the way a broken writer would, keeping its
checksum sidecars consistent so that only the lineage is wrong."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path

import google_crc32c

from ckpt_cli.formats import compression
from ckpt_cli.formats.checksums import hadoop_crc_bytes

BOGUS_ID = "deadbeef-0000-4000-8000-000000000000"


def rewrite_lineage(changelog: Path, version: int, unique_id: str = BOGUS_ID) -> str:
    """Make ``changelog``'s lineage name ``unique_id`` for ``version``; returns the old id."""
    old: list[str] = []

    def edit(line: bytes) -> bytes:
        lineage = json.loads(line)
        for item in lineage:
            if item["version"] == version:
                old.append(item["checkpointUniqueId"])
                item["checkpointUniqueId"] = unique_id
        return json.dumps(lineage, separators=(",", ":")).encode()

    edit_lineage_line(changelog, edit)
    assert old, f"{changelog.name}: no version {version} in its lineage"
    return old[0]


def edit_lineage_line(changelog: Path, edit: Callable[[bytes], bytes]) -> None:
    """Replace the ``writeUTF`` lineage line of a V3/V4 changelog with ``edit(line)``.

    The file is decompressed, edited, recompressed with the codec it was written with, and
    Spark's ``<name>.crc`` (JSON, CRC32C) and Hadoop's ``.<name>.crc`` (and
    ``.<name>.crc.crc``) rewritten for the new bytes.
    """
    raw = changelog.read_bytes()
    codec = compression.detect_codec(raw[:16])
    assert codec is not None, changelog
    data = compression.decompress(str(changelog), raw, codec=codec)
    (vlen,) = struct.unpack_from(">H", data, 0)
    at = 2 + vlen
    (llen,) = struct.unpack_from(">H", data, at)
    line = edit(data[at + 2 : at + 2 + llen])
    data = data[:at] + struct.pack(">H", len(line)) + line + data[at + 2 + llen :]
    out = compression.compress(data, codec)
    changelog.write_bytes(out)
    write_checksums(changelog, out)


def write_checksums(path: Path, data: bytes) -> None:
    """Rewrite whichever of Spark's and Hadoop's sidecars ``path`` has, for ``data``."""
    spark = path.parent / f"{path.name}.crc"
    if spark.exists():
        obj = json.loads(spark.read_bytes())
        value = google_crc32c.value(data)
        obj["value"] = value - (1 << 32) if value >= 1 << 31 else value
        obj["mainFileSize"] = len(data)
        body = json.dumps(obj, separators=(",", ":")).encode()
        spark.write_bytes(body)
        hidden = spark.parent / f".{spark.name}.crc"
        if hidden.exists():
            hidden.write_bytes(hadoop_crc_bytes(body))
    hadoop = path.parent / f".{path.name}.crc"
    if hadoop.exists():
        hadoop.write_bytes(hadoop_crc_bytes(data))
