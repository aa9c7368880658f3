"""The exceptions ckpt raises. The CLI turns each into one line and exit code 2."""

from __future__ import annotations

from typing import Any, ClassVar

from ckpt_cli.version import __version__


class CkptError(Exception):
    """Base of every error ckpt reports to a user.

    ``code`` is a stable UPPER_SNAKE identifier like the finding codes of ``validate`` (the
    ``"type"`` of ``--json`` errors), ``message`` a one-line description naming the file and
    what is wrong, ``hint`` an optional next step. A subclass names its code in its class
    statement: ``class TruncatedFileError(FormatError, code="TRUNCATED_FILE")``.
    """

    code: ClassVar[str] = "ERROR"

    def __init_subclass__(cls, *, code: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.code = code

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def to_json(self) -> dict[str, str | None]:
        return {"type": self.code, "message": self.message, "hint": self.hint}

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception's own pickling calls ``cls(*args)``, which the keyword-only and
        # multi-field constructors of the subclasses reject: a worker process's or Spark
        # task's error would then break the pool on the way back. Rebuild without calling
        # __init__ and restore every attribute instead.
        return (_rebuild, (type(self), self.args), self.__dict__)


def _rebuild(cls: type[BaseException], args: tuple[Any, ...]) -> BaseException:
    exc = cls.__new__(cls)
    BaseException.__init__(exc, *args)
    return exc


class CheckpointNotFound(CkptError, code="CHECKPOINT_NOT_FOUND"):
    pass


class NotACheckpoint(CkptError, code="NOT_A_CHECKPOINT"):
    pass


class StorageAccessError(CkptError, code="STORAGE_ACCESS"):
    pass


class MissingExtraError(CkptError, code="MISSING_EXTRA"):
    pass


class FormatError(CkptError, code="CORRUPT_FILE"):
    """A file's bytes do not match the format Spark writes.

    ``path`` names the file (checkpoint-relative where possible), ``offset`` the byte or line
    where decoding failed when known.
    """

    def __init__(
        self,
        path: str,
        problem: str,
        *,
        offset: int | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        where = ""
        if line is not None:
            where = f" (line {line})"
        elif offset is not None:
            where = f" (byte {offset})"
        super().__init__(f"{path}{where}: {problem}", hint=hint)
        self.path = path
        self.problem = problem
        self.offset = offset
        self.line = line


class UnsupportedVersionError(FormatError, code="UNSUPPORTED_VERSION"):
    """A version header ckpt does not know: the file may well be healthy (written by a newer
    Spark), so neither the message nor the hint may call it corrupt."""


def unsupported_hint() -> str:
    """The hint of an :class:`UnsupportedVersionError`."""
    return (
        f"ckpt {__version__} does not read this version; the file may be from a newer Spark "
        "and is not known to be damaged: run the query with the Spark that wrote it, or "
        "upgrade ckpt"
    )


class TruncatedFileError(FormatError, code="TRUNCATED_FILE"):
    """The file ends before the format's end marker (Spark would fail reading it)."""


class ChecksumMismatchError(FormatError, code="CHECKSUM_MISMATCH"):
    """A checksum stored in the file (or its sidecar) does not match the bytes."""


class UsageError(CkptError, code="USAGE"):
    """A bad option value: one line naming the option and what it accepts."""


class SafetyCheckError(CkptError, code="SAFETY_CHECK"):
    """A destructive command refused by a safety check (active query, --min-age, paths)."""


class OutsideCheckpointError(SafetyCheckError, code="OUTSIDE_CHECKPOINT"):
    """A delete, move or write whose path resolves outside the checkpoint (or quarantine)."""


class LockHeldError(CkptError, code="LOCK_HELD"):
    """Another cleanup or repair holds the checkpoint's lock."""


class LimitExceededError(FormatError, code="LIMIT_EXCEEDED"):
    """A file inflates (or lists) more than ckpt's safety limits allow: a decompression bomb,
    or a genuine file beyond the limits (the hint says how to raise them)."""
