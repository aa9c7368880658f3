"""The compiled replay kernel (``ckpt_cli/_kernel.c``), built with the package when a C
compiler is there; without one the build goes on and replay uses numpy and Arrow
(``ckpt_cli/core/kernel.py``). Everything else is in pyproject.toml."""

import hashlib
import os
from pathlib import Path

from setuptools import Extension, setup

SOURCE = "ckpt_cli/_kernel.c"
VENDORED = ["ckpt_cli/vendor/ryu.h", "ckpt_cli/vendor/xxhash.h"]
# The sources' hash, compiled in: a kernel built from other source is not loaded.
DIGEST = hashlib.sha256(
    b"".join((Path(__file__).parent / name).read_bytes() for name in [SOURCE, *VENDORED])
).hexdigest()[:16]

setup(
    ext_modules=[
        Extension(
            "ckpt_cli._kernel",
            [SOURCE],
            depends=VENDORED,
            define_macros=[("KERNEL_SOURCE", f'"{DIGEST}"')],
            extra_compile_args=["-O2", *os.environ.get("CKPT_KERNEL_CFLAGS", "").split()],
            optional=os.environ.get("CKPT_KERNEL_REQUIRED") != "1",
        )
    ]
)
