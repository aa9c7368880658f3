"""Bounds on what one checkpoint file may make ckpt inflate, parse or unpack.

A state file is small on disk and can decode to far more: a zstd frame of zeros inflates
~30,000x, lz4 ~250x, a deflated zip entry ~1,000x. These limits stop such a file while it is
being decoded (not after), on every path that reads it (inspect, validate, replay, repair,
cleanup), with a ``LimitExceededError`` naming the file and the limit.

Inflation is bounded by ratio *and* size: a file may decode to at most
``max(INFLATION_FLOOR, ratio x compressed bytes read so far)``, and never more than
``max_decompressed`` bytes. Real Spark state (UnsafeRows of keys and aggregation buffers)
compresses ~1.5-10x; 100x means a file that is nearly all one repeated pattern. The floor
lets small files be as compressible as they like (16 MiB decodes in about a second), so only
a file that is both large and implausibly compressible is refused. The ratio is checked
against the compressed bytes consumed so far, so a bomb is stopped after at most
``INFLATION_FLOOR`` bytes of output, whatever its total size.

Environment variables raise (or lower) the limits for genuine files beyond them:

* ``CKPT_MAX_INFLATION``: the ratio (default 100);
* ``CKPT_MAX_DECOMPRESSED_BYTES``: bytes one state file or zip entry may decode to
  (default 16 GiB; Spark's HDFS-backed store holds a whole partition's map in executor
  memory, so no real snapshot comes near it);
* ``CKPT_MAX_ZIP_ENTRIES``: entries of a RocksDB ``<v>.zip`` (default 10,000; Spark writes
  fewer than ten);
* ``CKPT_MAX_SST_FILES``: SST and log files one zip's metadata may list (default 100,000; one
  partition's RocksDB has hundreds).

A zip's ``metadata`` entry is also held to 168 bytes per allowed SST file (16 MiB) and its
central directory to 256 bytes per allowed entry, both parsed in memory.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Final

from ckpt_cli.errors import CkptError, LimitExceededError

INFLATION_ENV: Final = "CKPT_MAX_INFLATION"
DECOMPRESSED_ENV: Final = "CKPT_MAX_DECOMPRESSED_BYTES"
ZIP_ENTRIES_ENV: Final = "CKPT_MAX_ZIP_ENTRIES"
SST_FILES_ENV: Final = "CKPT_MAX_SST_FILES"

DEFAULT_INFLATION: Final = 100
INFLATION_FLOOR: Final = 16 << 20
DEFAULT_DECOMPRESSED_BYTES: Final = 16 << 30
DEFAULT_ZIP_ENTRIES: Final = 10_000
# A zip's ``metadata`` entry takes ~100 bytes of JSON per SST file it lists; this allows
# 168 (16 MiB for the default 100,000 files).
METADATA_BYTES_PER_FILE: Final = 168
# Central directory bytes allowed per zip entry allowed (Spark's names are ~20 characters:
# 46 bytes of record, the name, a few extra fields).
ZIP_DIRECTORY_BYTES_PER_ENTRY: Final = 256
DEFAULT_SHARED_FILES: Final = 100_000


@dataclass(frozen=True)
class Limits:
    """The limits in force; ``current()`` reads the environment."""

    max_inflation: float = DEFAULT_INFLATION
    max_decompressed_bytes: int = DEFAULT_DECOMPRESSED_BYTES
    max_zip_entries: int = DEFAULT_ZIP_ENTRIES
    max_shared_files: int = DEFAULT_SHARED_FILES
    floor: int = INFLATION_FLOOR

    @classmethod
    def current(cls) -> Limits:
        return cls(
            max_inflation=_env_number(INFLATION_ENV, DEFAULT_INFLATION),
            max_decompressed_bytes=int(_env_number(DECOMPRESSED_ENV, DEFAULT_DECOMPRESSED_BYTES)),
            max_zip_entries=int(_env_number(ZIP_ENTRIES_ENV, DEFAULT_ZIP_ENTRIES)),
            max_shared_files=int(_env_number(SST_FILES_ENV, DEFAULT_SHARED_FILES)),
        )

    @property
    def max_metadata_bytes(self) -> int:
        """Bytes a zip's ``metadata`` entry (JSON parsed in memory) may have."""
        return self.max_shared_files * METADATA_BYTES_PER_FILE

    def allowed(self, compressed: int) -> int:
        """Bytes a stream may have decoded to after ``compressed`` bytes of input."""
        by_ratio = max(self.floor, int(self.max_inflation * compressed))
        return min(self.max_decompressed_bytes, by_ratio)

    def check_inflation(
        self, path: str, compressed: int, decompressed: int, what: str, *, declared: bool = False
    ) -> None:
        """Raise when ``decompressed`` bytes from ``compressed`` are beyond the limits;
        ``declared``: the sizes are what a zip's directory says, not bytes decoded so far."""
        if decompressed <= self.allowed(compressed):
            return
        if decompressed > self.max_decompressed_bytes:
            raise LimitExceededError(
                path,
                f"{what} decodes to more than {self.max_decompressed_bytes} bytes "
                f"(the limit of {DECOMPRESSED_ENV})",
                hint=f"if the file is genuine, raise {DECOMPRESSED_ENV}",
            )
        sizes = (
            f"{compressed} compressed bytes declare {decompressed}"
            if declared
            else f"its first {compressed} bytes decoded to {decompressed}"
        )
        raise LimitExceededError(
            path,
            f"{what} inflates more than {self.max_inflation:g}x (the limit of {INFLATION_ENV}): "
            f"{sizes} (a decompression bomb?)",
            hint=f"if the file is genuine, raise {INFLATION_ENV} (e.g. {INFLATION_ENV}=1000)",
        )

    def check_count(self, path: str, count: int, limit: int, what: str, env: str) -> None:
        if count > limit:
            raise LimitExceededError(
                path,
                f"{what}: {count}, more than the limit of {limit} ({env})",
                hint=f"if the file is genuine, raise {env}",
            )


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (value > 0 and math.isfinite(value)):
        raise CkptError(f"{name}={raw!r}: expected a positive number")
    return value
