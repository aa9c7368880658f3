"""Run ckpt in a subprocess and SIGKILL it part way, and snapshot a tree to compare after."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from ckpt_cli.change.lock import LOCK_NAME

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


# Run the CLI with every write of a file whose path contains sys.argv[2] counted (the lock
# aside); the Nth writes half its bytes and the process dies on the spot (exit 9, no finally
# blocks run, like SIGKILL).
_DIE_IN_NTH_WRITE = """
import builtins, os, sys
from ckpt_cli.cli import main

real_open = builtins.open
nth, match = int(sys.argv[1]), sys.argv[2]
seen = 0

class Dying:
    def __init__(self, fh):
        self.fh = fh
    def write(self, data):
        self.fh.write(data[: len(data) // 2])
        self.fh.flush()
        os._exit(9)
    def __getattr__(self, name):
        return getattr(self.fh, name)
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return self.fh.__exit__(*exc)

def dying_open(file, mode="r", *args, **kwargs):
    global seen
    fh = real_open(file, mode, *args, **kwargs)
    if match in str(file) and "w" in mode and not str(file).endswith(".ckpt-lock"):
        seen += 1
        if seen == nth:
            return Dying(fh)
    return fh

builtins.open = dying_open
sys.argv = ["ckpt", *sys.argv[3:]]
main()
"""


def die_in_nth_write(nth: int, match: str, args: list[str]) -> subprocess.CompletedProcess[bytes]:
    """Run ``ckpt ARGS``, dying half way through its ``nth`` write of a file whose path
    contains ``match``."""
    return subprocess.run(
        [sys.executable, "-c", _DIE_IN_NTH_WRITE, str(nth), match, *args],
        env=ENV,
        capture_output=True,
    )
