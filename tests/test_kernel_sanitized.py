"""The replay kernel's tests (tests/test_kernel.py: random, damaged and hostile records and
rows) on a build with AddressSanitizer and UndefinedBehaviorSanitizer
(scripts/kernel_sanitize): an out-of-bounds read or write, a use after free, a signed
overflow, a misaligned or undefined operation fails the run, not only a wrong byte."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_the_kernel_under_sanitizers() -> None:
    cc = os.environ.get("CC", "gcc")
    runtime = (
        shutil.which(cc)
        and subprocess.run(
            [cc, "-print-file-name=libasan.so"], capture_output=True, text=True
        ).stdout.strip()
    )
    if not runtime or not os.path.isabs(runtime):
        if os.environ.get("CKPT_REQUIRE_KERNEL") == "1":
            pytest.fail(f"no {cc} with AddressSanitizer (CKPT_REQUIRE_KERNEL=1)")
        pytest.skip(f"no {cc} with AddressSanitizer")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(REPO / "scripts" / "kernel_sanitize")],
        env={**env, "PYTHON": sys.executable, "CKPT_KERNEL_EXAMPLES": "200"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    assert " passed" in done.stdout and " failed" not in done.stdout
