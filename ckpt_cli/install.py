"""The name ckpt is installed under, for every "pip install ..." a hint gives, and the error
for an optional dependency that is not there.

The command is ``ckpt`` and the import package ``ckpt_cli``; the distribution on the package
index is ``spark-ckpt`` (``ckpt-cli`` there is another project).
"""

from __future__ import annotations

from ckpt_cli.errors import MissingExtraError

DISTRIBUTION = "spark-ckpt"


def pip_install(extra: str | None = None) -> str:
    """The install command for ckpt with ``extra`` (``s3``, ``azure``, ``gcs``...)."""
    return f"pip install '{DISTRIBUTION}[{extra}]'" if extra else f"pip install {DISTRIBUTION}"


def missing_extra(what: str, extra: str, exc: ImportError) -> MissingExtraError:
    """``what`` (a command, an option, a location) needs the ``extra`` whose import failed
    with ``exc``: one line with the install command, the module that failed as the hint."""
    lines = str(exc).strip().splitlines()
    why = lines[0] if lines else type(exc).__name__
    module = exc.name.partition(".")[0] if exc.name else "a module it needs"
    return MissingExtraError(
        f"{what} needs the '{extra}' extra: {pip_install(extra)}",
        hint=f"{module} could not be imported ({why})",
    )
