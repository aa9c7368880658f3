"""The state schema files: ``state/<op>/0[/<store>]/_metadata/schema`` (versions 1 and 2) and
the 4.x ``state/<op>/_stateSchema/<store>/<batch>_<uuid>`` files (version 3), with the Spark
SQL types they store (``formats/spark_types``).

Binary framing follows Java ``DataOutputStream`` (docs/spark-checkpoint-format.md §8.1):

* v1: ``writeUTF("v1") writeUTF(keyJson) writeUTF(valueJson)``
* v2: ``writeUTF("v2")``, then key and value JSON each as ``int32 BE n`` + ``n x writeUTF``
* v3 (Spark 4.x ``SchemaV3Writer``, read from the 4.3.0 bytecode and checked against a file
  written by 4.3.0): ``writeUTF("v3") int32 BE numColumnFamilies``, then per column family
  ``writeUTF(name) int16 keySchemaId <json key> int16 valueSchemaId <json value>
  <json keyStateEncoderSpec> <json userKeyEncoderSchema or "{    }">``, where ``<json>``
  is the v2 chunked form.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field

from ckpt_cli.errors import (
    FormatError,
    TruncatedFileError,
    UnsupportedVersionError,
    unsupported_hint,
)
from ckpt_cli.formats.spark_types import (
    DataType,
    StructType,
    TypeJsonError,
    parse_struct_json,
    parse_type_json,
)

MAX_SCHEMA_VERSION = 3
DEFAULT_COLUMN_FAMILY = "default"


# -- Java DataInputStream ------------------------------------------------------------------


def decode_modified_utf8(data: bytes) -> list[int] | str:
    """Java modified UTF-8 to UTF-16 code units (or a str when the bytes are ASCII).

    Code units rather than a str: v2/v3 split long JSON into chunks on *chars*, so a
    surrogate pair can straddle two chunks and must be joined before decoding.
    Raises ValueError on malformed input (Java's UTFDataFormatException).
    """
    if data.isascii():
        return data.decode("ascii")
    units: list[int] = []
    i, n = 0, len(data)
    while i < n:
        c = data[i]
        if c < 0x80:
            units.append(c)
            i += 1
        elif c >> 5 == 0b110:
            if i + 1 >= n or data[i + 1] >> 6 != 0b10:
                raise ValueError(f"malformed 2-byte sequence at {i}")
            units.append(((c & 0x1F) << 6) | (data[i + 1] & 0x3F))
            i += 2
        elif c >> 4 == 0b1110:
            if i + 2 >= n or data[i + 1] >> 6 != 0b10 or data[i + 2] >> 6 != 0b10:
                raise ValueError(f"malformed 3-byte sequence at {i}")
            units.append(((c & 0x0F) << 12) | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F))
            i += 3
        else:
            raise ValueError(f"byte 0x{c:02x} at {i} cannot start a modified UTF-8 char")
    return units


def _units_to_str(parts: list[list[int] | str]) -> str:
    if all(isinstance(p, str) for p in parts):
        return "".join(p for p in parts if isinstance(p, str))
    units: list[int] = []
    for p in parts:
        if isinstance(p, str):
            units.extend(ord(ch) for ch in p)
        else:
            units.extend(p)
    raw = struct.pack(f"<{len(units)}H", *units)
    # surrogatepass keeps a lone surrogate (Java strings may hold one) instead of failing.
    return raw.decode("utf-16-le", "surrogatepass")


class _Reader:
    """A bounds-checked Java DataInputStream over bytes."""

    def __init__(self, path: str, data: bytes) -> None:
        self.path = path
        self.data = data
        self.pos = 0

    def _take(self, n: int, what: str) -> bytes:
        if self.pos + n > len(self.data):
            raise TruncatedFileError(
                self.path,
                f"file ends inside {what} (needs {n} bytes, {len(self.data) - self.pos} left)",
                offset=self.pos,
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def read_int(self, what: str) -> int:
        value: int = struct.unpack(">i", self._take(4, what))[0]
        return value

    def read_short(self, what: str) -> int:
        value: int = struct.unpack(">h", self._take(2, what))[0]
        return value

    def read_utf_units(self, what: str) -> list[int] | str:
        start = self.pos
        (length,) = struct.unpack(">H", self._take(2, what))
        raw = self._take(length, what)
        try:
            return decode_modified_utf8(raw)
        except ValueError as exc:
            raise FormatError(
                self.path, f"{what} is not modified UTF-8: {exc}", offset=start
            ) from None

    def read_utf(self, what: str) -> str:
        start = self.pos
        units = self.read_utf_units(what)
        return self._finish([units], what, start)

    def read_chunked(self, what: str) -> tuple[str, int]:
        """v2/v3 ``int32 n`` + ``n x writeUTF``; returns the text and where it started."""
        start = self.pos
        count = self.read_int(f"the chunk count of {what}")
        # Each chunk takes at least 2 bytes, so a count beyond that is corrupt (and would
        # otherwise loop for a long time on garbage).
        if count < 0 or count * 2 > len(self.data) - self.pos:
            raise FormatError(self.path, f"invalid chunk count {count} for {what}", offset=start)
        parts = [self.read_utf_units(f"{what} (chunk {i + 1} of {count})") for i in range(count)]
        return self._finish(parts, what, start), start

    def _finish(self, parts: list[list[int] | str], what: str, start: int) -> str:
        try:
            return _units_to_str(parts)
        except UnicodeDecodeError as exc:
            raise FormatError(self.path, f"{what}: bad text ({exc.reason})", offset=start) from None


# -- state schema files --------------------------------------------------------------------


@dataclass(frozen=True)
class KeyEncoderSpec:
    """How a column family's key is laid out in RocksDB (schema v3 ``keyStateEncoderSpec``).

    ``kind`` is Spark's class name: ``NoPrefixKeyStateEncoderSpec``,
    ``PrefixKeyScanStateEncoderSpec`` (``num_cols_prefix_key``), ``RangeKeyScanStateEncoderSpec``
    (``ordering_ordinals``), ``TimestampAsPrefixKeyStateEncoderSpec``,
    ``TimestampAsPostfixKeyStateEncoderSpec``.
    """

    kind: str
    num_cols_prefix_key: int = 0
    ordering_ordinals: tuple[int, ...] = ()
    raw_json: str = "{}"


NO_PREFIX = KeyEncoderSpec("NoPrefixKeyStateEncoderSpec", raw_json="{}")


@dataclass(frozen=True)
class ColumnFamilySchema:
    name: str
    key: StructType
    value: StructType
    key_schema_id: int = 0
    value_schema_id: int = 0
    key_encoder: KeyEncoderSpec = NO_PREFIX
    # transformWithState MapState: the user key's type; None when absent.
    user_key_encoder_schema: DataType | None = None


@dataclass(frozen=True)
class StateSchema:
    """A parsed schema file.

    ``key``/``value`` are those of the ``default`` column family (v1/v2: the only one; v3: the
    ``default`` entry when present, else the first listed).
    """

    key: StructType
    value: StructType
    version: int
    column_families: tuple[ColumnFamilySchema, ...] = field(default=())
    # Bytes after the last schema (Spark ignores them; non-zero suggests corruption).
    trailing_bytes: int = 0

    def column_family(self, name: str) -> ColumnFamilySchema | None:
        return next((cf for cf in self.column_families if cf.name == name), None)


def _parse_encoder_spec(path: str, text: str, offset: int) -> KeyEncoderSpec:
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise FormatError(path, f"key encoder spec is not JSON: {exc}", offset=offset) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("keyStateEncoderType"), str):
        raise FormatError(path, "key encoder spec has no keyStateEncoderType string", offset=offset)
    prefix = obj.get("numColsPrefixKey", 0)
    ordinals = obj.get("orderingOrdinals", [])
    if isinstance(prefix, bool) or not isinstance(prefix, int) or prefix < 0:
        raise FormatError(path, f"invalid numColsPrefixKey {prefix!r}", offset=offset)
    if not isinstance(ordinals, list) or not all(
        isinstance(o, int) and not isinstance(o, bool) for o in ordinals
    ):
        raise FormatError(path, f"invalid orderingOrdinals {ordinals!r}", offset=offset)
    return KeyEncoderSpec(
        obj["keyStateEncoderType"], prefix, tuple(ordinals), json.dumps(obj, sort_keys=True)
    )


def _parse_user_key_schema(path: str, text: str, offset: int) -> DataType | None:
    # Spark writes "{    }" when absent and reads it back with Try(...).toOption.
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    if obj == {}:
        return None
    try:
        return parse_type_json(obj)
    except TypeJsonError:
        return None


def parse_state_schema(path: str, data: bytes) -> StateSchema:
    """A ``_metadata/schema`` (v1/v2) or ``_stateSchema/...`` (v3) file."""
    reader = _Reader(path, bytes(data))
    if not data:
        raise FormatError(path, "empty schema file")
    header = reader.read_utf("the version header")
    if len(header) < 2 or header[0] != "v" or not header[1:].isdigit():
        raise FormatError(
            path, f"expected a version header like 'v2', found {header[:20]!r}", offset=0
        )
    version = int(header[1:])
    if version < 1 or version > MAX_SCHEMA_VERSION:
        raise UnsupportedVersionError(
            path,
            f"state schema version v{version} is unsupported (ckpt reads v1-v{MAX_SCHEMA_VERSION})",
            offset=0,
            hint=unsupported_hint(),
        )
    families: list[ColumnFamilySchema] = []
    if version == 1:
        key_at = reader.pos
        key = parse_struct_json(path, reader.read_utf("the key schema"), offset=key_at)
        value_at = reader.pos
        value = parse_struct_json(path, reader.read_utf("the value schema"), offset=value_at)
        families.append(ColumnFamilySchema(DEFAULT_COLUMN_FAMILY, key, value))
    elif version == 2:
        text, at = reader.read_chunked("the key schema")
        key = parse_struct_json(path, text, offset=at)
        text, at = reader.read_chunked("the value schema")
        value = parse_struct_json(path, text, offset=at)
        families.append(ColumnFamilySchema(DEFAULT_COLUMN_FAMILY, key, value))
    else:
        start = reader.pos
        count = reader.read_int("the column family count")
        if count < 0 or count * 16 > len(data) - reader.pos:
            raise FormatError(path, f"invalid column family count {count}", offset=start)
        for i in range(count):
            what = f"column family {i + 1} of {count}"
            name = reader.read_utf(f"the name of {what}")
            key_id = reader.read_short(f"the key schema id of {what}")
            text, at = reader.read_chunked(f"the key schema of {what}")
            key = parse_struct_json(path, text, offset=at)
            value_id = reader.read_short(f"the value schema id of {what}")
            text, at = reader.read_chunked(f"the value schema of {what}")
            value = parse_struct_json(path, text, offset=at)
            text, at = reader.read_chunked(f"the key encoder spec of {what}")
            spec = _parse_encoder_spec(path, text, at)
            text, at = reader.read_chunked(f"the user key schema of {what}")
            user_key = _parse_user_key_schema(path, text, at)
            families.append(ColumnFamilySchema(name, key, value, key_id, value_id, spec, user_key))
    # Spark ignores bytes after the schema, so they are reported, not rejected.
    trailing = len(reader.data) - reader.pos
    if not families:
        return StateSchema(StructType(), StructType(), version, (), trailing)
    main = next((cf for cf in families if cf.name == DEFAULT_COLUMN_FAMILY), families[0])
    return StateSchema(main.key, main.value, version, tuple(families), trailing)
