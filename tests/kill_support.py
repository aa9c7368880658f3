"""Run ckpt in a subprocess and SIGKILL it part way, and snapshot a tree to compare after."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from ckpt_cli.lock import LOCK_NAME

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (links not followed) with its bytes."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if not path.is_symlink():
                out[str(path.relative_to(root))] = path.read_bytes()
    return out


def kill_mid_command(args: list[str], root: Path, rng: random.Random) -> None:
    """Run ``ckpt ARGS`` and SIGKILL it at a random point once it holds the checkpoint lock
    (everything it changes, it changes under the lock); it may also finish first."""
    kill_after(args, root, rng.uniform(0, 0.05))


def kill_after(args: list[str], root: Path, delay: float) -> int:
    """Run ``ckpt ARGS`` and SIGKILL it ``delay`` seconds after it takes the lock; its pid."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ckpt_cli", *args],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not (root / LOCK_NAME).exists() and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return proc.pid
