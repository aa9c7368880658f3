"""Sizes for people: one spelling of bytes everywhere ckpt prints them."""

from __future__ import annotations


def human_bytes(n: int) -> str:
    """Binary units, as ``ls -h`` and Spark's UI count: ``1536`` -> ``1.5 KiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"
