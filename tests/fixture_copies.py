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
