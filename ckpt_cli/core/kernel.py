"""The compiled replay kernel (``ckpt_cli/_kernel.c``) where it is built, else nothing.

Replay's hot loop in C: the records of one partition's decompressed files framed, merged
(per key its first record's key and its last record's value, by first record) and formatted
straight into JSON lines or CSV rows, and the data blocks of a RocksDB zip's SST files (once
``formats/sst`` has checked and decompressed them) read into records. Everything else stays
in Python: plans, decompression,
schemas and every error. What the kernel cannot vouch for (a file that does not frame, a
damaged row, a value the reference path writes its own way) it hands back as None, and the
numpy/Arrow path (``bulk``, ``columns``, ``csv_arrow``: the reference, which tests compare it
with byte for byte) does that partition or batch.

The kernel is built with the package (setup.py) where a C compiler is; without one, or when
the module was built from other source than the ``_kernel.c`` beside it (a checkout edited
since its build: ``scripts/build_kernel``), ``load`` gives None and replay runs the numpy/Arrow
path, which ``ckpt --debug replay`` says once on stderr.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import struct
from collections.abc import Iterator
from json.encoder import encode_basestring
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ckpt_cli.formats import spark_types as S
from ckpt_cli.formats.state_schema import StateSchema
from ckpt_cli.formats.unsaferow import MAX_LONG_DIGITS

if TYPE_CHECKING:
    from ckpt_cli.formats.sst import Records


class Columns(Protocol):
    """Records laid out in one buffer, by column (``state.bulk.Packed`` is one)."""

    data: Any
    key_offsets: Any
    key_sizes: Any
    value_offsets: Any
    value_sizes: Any


# False: replay as if the kernel were not built (tests compare the two paths).
ENABLED = True
# Records a batch of text the kernel writes: fewer hand-offs of the GIL than ``bulk``'s
# 16,384 (10M keys to JSON lines: 5.9-6.3 -> 3.5-3.6 s, NOTES), ~7 MB of text each.
TEXT_BATCH_ROWS = 1 << 16

# Node kinds of a schema program (the enum in _kernel.c).
(
    _VOID,
    _BOOLEAN,
    _BYTE,
    _SHORT,
    _INTEGER,
    _LONG,
    _FLOAT,
    _DOUBLE,
    _DATE,
    _TIMESTAMP,
    _TIMESTAMP_NTZ,
    _STRING,
    _BINARY,
    _DECIMAL,
    _YEAR_MONTH,
    _DAY_TIME,
    _STRUCT,
    _ARRAY,
) = range(18)

_ATOMIC = {
    "void": _VOID,
    "boolean": _BOOLEAN,
    "byte": _BYTE,
    "short": _SHORT,
    "integer": _INTEGER,
    "long": _LONG,
    "float": _FLOAT,
    "double": _DOUBLE,
    "date": _DATE,
    "timestamp": _TIMESTAMP,
    "timestamp_ntz": _TIMESTAMP_NTZ,
    "string": _STRING,
    "binary": _BINARY,
}


@functools.cache
def _loaded() -> tuple[Any, str | None]:
    """The kernel module, or None and why not."""
    try:
        # By name: ``from ckpt_cli import _kernel`` reads as an import of the package root
        # (and the API it re-exports) to the import contracts.
        _kernel = importlib.import_module("ckpt_cli._kernel")
    except ImportError as exc:
        return None, f"the compiled replay kernel is not built ({exc})"
    package = Path(__file__).resolve().parent.parent
    source = package / "_kernel.c"
    if source.is_file():  # a checkout: its build must be of this source (as setup.py hashes it)
        sources = (source, package / "vendor" / "ryu.h", package / "vendor" / "xxhash.h")
        digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
        if digest != _kernel.SOURCE:
            return None, (
                "the compiled replay kernel was built from other source than "
                f"{source.name} (run scripts/build_kernel, or pip install again)"
            )
    _kernel.seed(*struct.unpack("<QQ", os.urandom(16)))
    return _kernel, None


def load() -> Any:
    """The kernel module, or None when it is not built or turned off (``ENABLED``)."""
    return _loaded()[0] if ENABLED else None


def missing() -> str | None:
    """Why replay runs without the kernel (None when it runs with it)."""
    if not ENABLED:
        return "the compiled replay kernel is turned off"
    return _loaded()[1]


# -- decompressing ---------------------------------------------------------------------------------

# Files read whole for the kernel to decompress together, at most (compressed bytes).
WHOLE_FILES_BYTES = 256 << 20


def lz4_files(datas: list[bytes]) -> tuple[bytes, list[int]] | None:
    """Spark lz4 streams (whole files) decompressed one after another by the kernel, without
    the GIL: the bytes and where each file's end; None where ``formats/compression`` would
    raise or the kernel is unsure (the caller reads the files with it then, and it names the
    problem), or when a file is not an lz4 stream."""
    from ckpt_cli.formats.limits import Limits

    limits = Limits.current()
    found: tuple[bytes, list[int]] | None = load().lz4_streams(
        datas, limits.max_inflation, limits.floor, limits.max_decompressed_bytes
    )
    return found


# -- merging -------------------------------------------------------------------------------------


def merge(
    data: bytes | bytearray,
    segments: list[tuple[int, int, bool]],
    *,
    dedupe: bool,
    removes: bool = False,
) -> Any:
    """The records of ``segments`` (start, end, snapshot) of ``data`` in turn: with ``dedupe``
    per key its first record's key and its last record's value, by first record, keys whose
    last record is a remove left out (kept with ``removes``: a changelog's); None when a
    segment does not frame cleanly. The kernel must be loaded."""
    return load().merge(data, segments, dedupe, removes)


def sst_block_records(path: str, blocks: list[bytes]) -> Records:
    """``sst.block_records`` by the kernel: the entries of consecutive decompressed data
    blocks. Where the kernel hands them back, ``sst.block_records`` decodes them, or raises
    the FormatError that names the problem. The kernel must be loaded."""
    import numpy as np

    from ckpt_cli.formats import sst

    got = load().sst_records(b"".join(blocks), np.array([len(b) for b in blocks], np.int64))
    if got is None:
        return sst.block_records(path, blocks)
    return _sst_records(*got)


def _sst_records(data: Any, *columns: Any) -> Records:
    """The kernel's entries (key offsets and sizes, value offsets and sizes, kinds, repeats)
    over ``data`` as ``sst.Records``."""
    import numpy as np

    from ckpt_cli.formats import sst

    types = (np.int64, np.int64, np.int64, np.int64, np.uint8, np.bool_)
    arrays: list[Any] = [np.frombuffer(c, t) for c, t in zip(columns, types, strict=True)]
    return sst.Records(data, *arrays)


def sst_run(
    data: bytes, handles: list[tuple[int, int]], checksum_type: int, most: int
) -> tuple[Records, int] | None:
    """``sst.Table.read_blocks`` and ``sst.block_records`` of the data blocks at ``handles``
    of the SST file ``data``, by the kernel in one call: their records and the bytes
    decompressed (at most ``most``), or None where the kernel hands the run back (another
    checksum than XXH3 or compression than LZ4, a damaged block, the limits passed): the
    module then reads it, and names any problem. The kernel must be loaded."""
    import numpy as np

    where = np.array(handles, np.int64).reshape(-1, 2)
    got = load().sst_run(
        data,
        np.ascontiguousarray(where[:, 0]),
        np.ascontiguousarray(where[:, 1]),
        checksum_type,
        most,
    )
    if got is None:
        return None
    *entries, decompressed = got
    return _sst_records(*entries), decompressed


# -- formatting ----------------------------------------------------------------------------------


def program(t: S.DataType) -> tuple[Any, ...] | None:
    """The kernel's program for values of Spark type ``t``, or None when it has no text for
    them (a map, a type the columnar path does not decode)."""
    while isinstance(t, S.UserDefinedType):
        t = t.sql_type
    if isinstance(t, S.StringLikeType):
        return (_STRING,)
    if isinstance(t, S.AtomicType):
        kind = _ATOMIC.get(t.name)
        return None if kind is None else (kind,)
    if isinstance(t, S.DecimalType):
        return (_DECIMAL, t.scale) if t.precision <= MAX_LONG_DIGITS else None
    if isinstance(t, S.YearMonthIntervalType):
        return (_YEAR_MONTH,)
    if isinstance(t, S.DayTimeIntervalType):
        return (_DAY_TIME,)
    if isinstance(t, S.ArrayType):
        element = program(t.element_type)
        return None if element is None else (_ARRAY, element)
    if isinstance(t, S.StructType):
        fields = []
        for name, f in zip(t.unique_names(), t.fields, strict=True):
            node = program(f.data_type)
            if node is None:
                return None
            try:
                label = encode_basestring(name).encode()
            except UnicodeEncodeError:
                return None
            fields.append((label, node))
        return (_STRUCT, tuple(fields))
    return None


def _csv_names(prefix: str, t: S.DataType) -> list[str]:
    """The CSV columns a value of ``t`` flattens to (``csv_arrow._spark_types``' names)."""
    while isinstance(t, S.UserDefinedType):
        t = t.sql_type
    if not isinstance(t, S.StructType):
        return [prefix]
    return [
        name
        for field_name, f in zip(t.unique_names(), t.fields, strict=True)
        for name in _csv_names(f"{prefix}.{field_name}", f.data_type)
    ]


class Formatter:
    """One store's records as JSON lines and CSV rows, the bytes ``columns.Columnar`` and
    ``csv_arrow`` write for them; None for a batch the reference path must do."""

    def __init__(self, fmt: Any, csv: bool) -> None:
        self._format = fmt
        self._csv = csv

    @property
    def writes_csv(self) -> bool:
        return self._csv

    def jsonl(self, partition: int, batch: Columns) -> bytes | None:
        text: bytes | None = self._format.jsonl(partition, *_arrays(batch))
        return text

    def csv(self, partition: int, batch: Columns) -> bytes | None:
        if not self._csv:
            return None
        text: bytes | None = self._format.csv(partition, *_arrays(batch))
        return text

    def arrays(self, batch: Columns, key_type: Any, value_type: Any) -> tuple[Any, Any] | None:
        """The keys and values of a batch as Arrow struct arrays of their plain values (of
        ``plain_arrow.plain_type``: the arrays ``plain_arrow.plain`` makes), or None for a
        batch the reference path must do (and for schemas with arrays)."""
        buffers: list[tuple[int, Any, Any, Any]] | None = self._format.columns(*_arrays(batch))
        if buffers is None:
            return None
        nodes = iter(buffers)
        n = len(batch.key_sizes)
        return _array(key_type, nodes, n), _array(value_type, nodes, n)


def _array(t: Any, nodes: Iterator[tuple[int, Any, Any, Any]], n: int) -> Any:
    """The Arrow array of type ``t`` whose buffers (and its fields') ``nodes`` give next."""
    import pyarrow as pa

    nulls, valid, offsets, data = next(nodes)
    validity = pa.py_buffer(valid) if nulls else None
    if pa.types.is_struct(t):
        children = [_array(t.field(i).type, nodes, n) for i in range(t.num_fields)]
        return pa.StructArray.from_buffers(t, n, [validity], nulls, children=children)
    if pa.types.is_null(t):
        return pa.nulls(n)
    if offsets is not None:
        return pa.Array.from_buffers(
            t, n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)], nulls
        )
    return pa.Array.from_buffers(t, n, [validity, pa.py_buffer(data)], nulls)


def _arrays(batch: Columns) -> tuple[Any, ...]:
    import numpy as np

    return (
        batch.data,
        np.ascontiguousarray(batch.key_offsets),
        np.ascontiguousarray(batch.key_sizes),
        np.ascontiguousarray(batch.value_offsets),
        np.ascontiguousarray(batch.value_sizes),
    )


def formatter(schema: StateSchema, *, rocks: bool, repr_floats: bool) -> Formatter | None:
    """The kernel's formatter of a store's rows (``rocks``: RocksDB's ``[0x00][row]``;
    ``repr_floats``: JSON floats as ``repr``, else as orjson), or None when the kernel is not
    loaded or has no text for the schema."""
    kernel = load()
    if kernel is None:
        return None
    key, value = program(schema.key), program(schema.value)
    if key is None or value is None:
        return None
    names = ["partition_id", *_csv_names("key", schema.key), *_csv_names("value", schema.value)]
    # Two columns of one name: csv_arrow looks their types up by name; left to it.
    csv = len(set(names)) == len(names)
    return Formatter(kernel.Format(key, value, rocks, repr_floats), csv)
