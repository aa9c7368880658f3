"""The name ckpt is installed under, for every "pip install ..." a hint gives.

The command is ``ckpt`` and the import package ``ckpt_cli``; the distribution on the package
index is ``spark-ckpt`` (``ckpt-cli`` there is another project).
"""

from __future__ import annotations

DISTRIBUTION = "spark-ckpt"


def pip_install(extra: str | None = None) -> str:
    """The install command for ckpt with ``extra`` (``s3``, ``azure``, ``gcs``...)."""
    return f"pip install '{DISTRIBUTION}[{extra}]'" if extra else f"pip install {DISTRIBUTION}"
