"""Benchmark: UnsafeRow decoding throughput (rows/s on one core) per schema, dict and tuple mode.

Decodes ``--rows`` distinct rows (every row its own values: nothing cycled from a few rows,
which would let caches flatter the figures) with a decoder compiled once per schema by
``make_decoder``, each run in a forked child (benchmarks/common.py), dict and tuple mode
alternating, ``--repeat`` rounds, and reports rows/s from the min and median wall for:

* a 3-field aggregation value ``{count: long, sum: long, max: timestamp}`` (with and without
  a null ``max``)
* a 1-field string key ``{k: string}``
* a 3-field row ``{k: string, n: long, d: double}``
The 15-field key and 10-field value of the real Spark 4.3 rows in
``tests/formats/data_rows/hdfs_types`` are a handful of rows: too few to time without cycling
them, so they are left out (benchmarks/bench_decode.py covers nested schemas).

    .venv/bin/python benchmarks/bench_unsaferow.py [--rows 200000] [--repeat 3] [--quick]
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from common import (  # noqa: E402
    Case,
    Measurement,
    add_options,
    alternate,
    figures,
    machine,
    measure_call,
    report,
    row,
)

from ckpt_cli.formats import spark_types as S  # noqa: E402
from ckpt_cli.formats.unsaferow import make_decoder  # noqa: E402

REAL = REPO / "tests" / "formats" / "data_rows" / "hdfs_types" / "store"
TS_2024 = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z in microseconds


def _struct(*fields: tuple[str, S.DataType]) -> S.StructType:
    return S.StructType(tuple(S.StructField(name, t) for name, t in fields))


def _string_row(prefix: bytes, text: bytes, suffix: bytes, slot_index: int) -> bytes:
    """A row whose field ``slot_index`` is a string placed right after the fixed part."""
    fixed = len(prefix) + 8 + len(suffix)
    slot = struct.pack("<Q", fixed << 32 | len(text))
    assert len(prefix) == 8 * (1 + slot_index)
    return prefix + slot + suffix + text + b"\x00" * (-len(text) % 8)


def value_rows(n: int, null_max: bool) -> list[bytes]:
    nulls = 0b100 if null_max else 0
    return [
        struct.pack("<Qqqq", nulls, i + 1, 7 * i, 0 if null_max else TS_2024 + 1_000_003 * i)
        for i in range(n)
    ]


def string_key_rows(n: int) -> list[bytes]:
    return [_string_row(b"\x00" * 8, f"key-{i}".encode(), b"", 0) for i in range(n)]


def string_long_double_rows(n: int) -> list[bytes]:
    return [
        _string_row(b"\x00" * 8, f"key-{i}".encode(), struct.pack("<qd", i, i / 7), 0)
        for i in range(n)
    ]


def decode_all(decode: Callable[[bytes], Any], rows: list[bytes]) -> float:
    """CPU seconds of decoding every row (the fork and the exit not counted)."""
    consume: Callable[[Any], None] = deque(maxlen=0).extend
    start = time.process_time()
    consume(map(decode, rows))
    seconds: float = time.process_time() - start
    return seconds


def case(mode: str, decode: Callable[[bytes], Any], rows: list[bytes], spent: list[float]) -> Case:
    """Decode ``rows`` in a forked child; the loop's CPU seconds go to ``spent``."""

    def run() -> Measurement:
        measured, seconds = measure_call(lambda: decode_all(decode, rows))
        spent.append(seconds)
        return measured

    return Case(mode, run)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    add_options(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.rows = 20_000
    n = args.rows
    value = _struct(("count", S.LONG), ("sum", S.LONG), ("max", S.TIMESTAMP))
    cases: list[tuple[str, S.StructType, list[bytes]]] = [
        ("value {count: long, sum: long, max: timestamp}", value, value_rows(n, False)),
        ("  same, max null", value, value_rows(n, True)),
        ("key {k: string}", _struct(("k", S.STRING)), string_key_rows(n)),
        (
            "{k: string, n: long, d: double}",
            _struct(("k", S.STRING), ("n", S.LONG), ("d", S.DOUBLE)),
            string_long_double_rows(n),
        ),
    ]
    table_rows: list[dict[str, str]] = []
    for name, schema, distinct in cases:
        assert len(set(distinct)) == n  # no row repeats
        modes = {"dict": make_decoder(schema), "tuple": make_decoder(schema, as_tuple=True)}
        spent: dict[str, list[float]] = {mode: [] for mode in modes}
        mode_cases = [case(m, d, distinct, spent[m]) for m, d in modes.items()]
        runs = alternate(mode_cases, args.repeat)
        for mode, measured in runs.items():
            fastest, median = figures(spent[mode])
            table_rows.append(
                row(
                    f"{name} ({mode})",
                    measured,
                    **{"rows/s of CPU (best / median)": f"{n / fastest:,.0f} / {n / median:,.0f}"},
                )
            )
    report(
        args,
        f"UnsafeRow decoding, {n:,} distinct rows, one core",
        f"Forked children, dict and tuple mode alternating, {args.repeat} rounds; {machine()}. "
        "Rows/s from the CPU time of the decoding loop alone, measured in the child: on a "
        "shared machine wall time says more about the neighbours.",
        table_rows,
    )


if __name__ == "__main__":
    main()
