"""Helpers for tests that copy a real fixture and change it."""

from __future__ import annotations

import os
import time
from pathlib import Path


def age_everything(root: Path, seconds: float = 7200) -> None:
    """Fixture files carry their checkout time: make every file and directory (links not
    followed) look an idle query's, so the --min-age and active-query guards let them be."""
    when = time.time() - seconds
    for path in [root, *root.rglob("*")]:
        os.utime(path, (when, when), follow_symlinks=False)


def latest(root: Path) -> int:
    return max(int(p.name) for p in (root / "commits").iterdir() if p.name.isdigit())


def truncate_latest_delta(root: Path) -> None:
    """State of the last batch corrupted: its delta cut short."""
    delta = root / f"state/0/0/{latest(root) + 1}.delta"
    delta.write_bytes(delta.read_bytes()[:-10])
    (delta.parent / f".{delta.name}.crc").unlink(missing_ok=True)
