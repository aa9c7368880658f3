"""The compiled replay kernel (``ckpt_cli/_kernel.c``), built with the package when a C
compiler is there; without one the build goes on and replay uses numpy and Arrow
(``ckpt_cli/core/kernel.py``). Everything else is in pyproject.toml."""

import hashlib
import os
from pathlib import Path

from setuptools import Extension, setup

SOURCE = "ckpt_cli/_kernel.c"
# The source's hash, compiled in: a kernel built from other source is not loaded.
DIGEST = hashlib.sha256((Path(__file__).parent / SOURCE).read_bytes()).hexdigest()[:16]

setup(
    ext_modules=[
        Extension(
            "ckpt_cli._kernel",
            [SOURCE],
            define_macros=[("KERNEL_SOURCE", f'"{DIGEST}"')],
            extra_compile_args=["-O2", *os.environ.get("CKPT_KERNEL_CFLAGS", "").split()],
            optional=os.environ.get("CKPT_KERNEL_REQUIRED") != "1",
        )
    ]
)
