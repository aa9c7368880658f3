"""Error codes: one naming style with the finding codes, and the same meaning where shared."""

from __future__ import annotations

import re

from ckpt_cli import errors
from ckpt_cli.errors import (
    CkptError,
    FormatError,
    LimitExceededError,
    TruncatedFileError,
    UnsupportedVersionError,
)
from ckpt_cli.validate import CODES, format_error_code


def _error_classes() -> list[type[CkptError]]:
    return [
        cls for cls in vars(errors).values() if isinstance(cls, type) and issubclass(cls, CkptError)
    ]


def test_error_codes_are_upper_snake_and_distinct() -> None:
    found = [cls.code for cls in _error_classes()]
    assert len(found) >= 10
    assert all(re.fullmatch(r"[A-Z]+(_[A-Z]+)*", code) for code in found), found
    assert len(set(found)) == len(found), found


def test_a_code_shared_with_findings_names_the_same_problem() -> None:
    for cls in (FormatError, TruncatedFileError, LimitExceededError, UnsupportedVersionError):
        exc = cls("x", "problem")
        assert exc.code in CODES
        assert format_error_code(exc) == exc.code
        assert exc.to_json()["type"] == exc.code
