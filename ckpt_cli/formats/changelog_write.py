"""A RocksDB ``<version>.changelog`` of deletes, written (docs §6,
``StateStoreChangelogWriterV1``-``V4``).

* V1 (no column families, checkpoint format v1): the delta layout,
  ``int32 keySize | key | int32 -1`` per removed key, then ``int32 -1``;
* V2 (column families): ``writeUTF("v2")``, then ``0x10 | int32 keySize | key | int32 -1``
  per removed key, then the EOF byte ``0x00``;
* V3 / V4 (checkpoint format v2, without / with column families): ``writeUTF("v3"|"v4")``,
  ``writeUTF(lineage)`` (a JSON list of ``{"version", "checkpointUniqueId"}``: the versions
  from the base zip to the one before, ascending), then V1 / V2 records.

Keys are RocksDB keys as stored (the encoded bytes, column family prefix included). The whole
file is compressed with the store's codec, as deltas are.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Sequence

from ckpt_cli.errors import CkptError
from ckpt_cli.formats import compression
from ckpt_cli.formats.records import LineageEntry
from ckpt_cli.formats.snapshot_write import encode_removals

_INT = struct.Struct(">i")
_DELETE = b"\x10"
_EOF = b"\x00"


def _write_utf(text: str) -> bytes:
    # Java's modified UTF-8 equals UTF-8 for the ASCII JSON written here.
    data = text.encode("ascii")
    if len(data) > 0xFFFF:
        raise CkptError(f"a changelog header line of {len(data)} bytes exceeds writeUTF's 65535")
    return struct.pack(">H", len(data)) + data


def lineage_json(lineage: Sequence[LineageEntry]) -> str:
    """The lineage line as Spark writes it (``{"version":8,"checkpointUniqueId":"…"}``)."""
    entries = [{"version": e.version, "checkpointUniqueId": e.unique_id} for e in lineage]
    return json.dumps(entries, separators=(",", ":"))


def encode_changelog_removals(
    keys: Iterable[bytes],
    codec: str,
    format_version: int,
    lineage: Sequence[LineageEntry] = (),
) -> bytes:
    """A changelog of ``format_version`` (1-4) that deletes ``keys``; ``lineage`` for V3/V4."""
    if format_version == 1:
        return encode_removals(keys, codec)
    if format_version not in (2, 3, 4):
        raise CkptError(f"changelog version {format_version}: ckpt writes versions 1 to 4")
    head = _write_utf(f"v{format_version}")
    if format_version >= 3:
        head += _write_utf(lineage_json(lineage))
    pack = _INT.pack
    if format_version == 3:
        body = b"".join(pack(len(key)) + key + pack(-1) for key in keys) + pack(-1)
    else:
        body = b"".join(_DELETE + pack(len(key)) + key + pack(-1) for key in keys) + _EOF
    return b"".join(compression.compressed_chunks((head + body,), codec))
