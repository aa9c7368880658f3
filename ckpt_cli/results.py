"""What every operation's result offers the CLI: whether all is well, the ``status`` word of its
JSON document, and that document.

Exit codes and renderers read these three and nothing else, so a new result type needs no
change in either (see :mod:`ckpt_cli.cli.output`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

OK = "ok"
PROBLEMS = "problems"


class Result(Protocol):
    @property
    def ok(self) -> bool:
        """False when the operation found problems (exit code 1)."""
        ...

    @property
    def status(self) -> str:
        """The ``status`` of the JSON document: ``ok`` or ``problems``."""
        ...

    def to_json(self) -> dict[str, Any]:
        """The whole JSON document, ``status`` included."""
        ...


def status_of(ok: bool) -> str:
    return OK if ok else PROBLEMS


Confirm = Callable[[Result, str], bool]
"""Asked before a destructive step, with the plan about to be carried out and a yes/no question:
the CLI shows the plan and prompts (or refuses without a terminal); None means go ahead."""
