"""Sizes, times and ages for people: one spelling of each everywhere ckpt prints them."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key with the numbers in a name in order: ``state/0/9`` before ``state/0/10``
    (partition directories, batch files), where plain string order puts 10 after 1."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in _DIGITS.split(text) if p)


def iso_ms(ms: int | None) -> str | None:
    """Epoch milliseconds as ISO-8601 UTC (``2026-11-24T17:28:11.959Z``); None stays None."""
    if ms is None:
        return None
    when = dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def watermark_iso(ms: int | None) -> str | None:
    """A watermark as :func:`iso_ms`; None for none, and for 0, Spark's "no watermark yet" (no
    event-time column, or no data so far)."""
    return iso_ms(ms) if ms else None


def seconds_since(ms: int, now: float) -> float:
    """Seconds from epoch milliseconds ``ms`` to ``now`` (epoch seconds), to the millisecond:
    the age of a batch or a file. Negative when ``ms`` is after ``now`` (clocks apart)."""
    return round(now - ms / 1000, 3)


def ago(seconds: float) -> str:
    """An age in words: ``5m 3s ago``, or ``2s in the future`` (another machine's clock)."""
    if seconds < 0:
        return f"{human_duration(-seconds)} in the future"
    return f"{human_duration(seconds)} ago"


def human_bytes(n: int) -> str:
    """Binary units, as ``ls -h`` and Spark's UI count: ``1536`` -> ``1.5 KiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def human_duration(seconds: float) -> str:
    """An age for people, its two largest units: ``93784`` -> ``1d 2h``, ``75`` -> ``1m 15s``."""
    if seconds < 0:
        return "in " + human_duration(-seconds)
    left = int(seconds)
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if left >= size or (unit == "s" and not parts):
            parts.append(f"{left // size}{unit}")
            left %= size
    return " ".join(parts[:2])


def format_duration(seconds: float) -> str:
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:g}s"
