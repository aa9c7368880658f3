"""What every operation's result offers the CLI: whether all is well, the ``status`` word of its
JSON document, and that document.

Exit codes and renderers read these three and nothing else, so a new result type needs no
change in either (see :mod:`ckpt_cli.cli.output`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

OK = "ok"
PROBLEMS = "problems"


def status_of(ok: bool) -> str:
    return OK if ok else PROBLEMS


class Result(ABC):
    """A result: ``ok`` (False when problems were found: exit code 1), its ``status`` and its
    JSON document (``status`` first, then ``body_json``)."""

    @property
    @abstractmethod
    def ok(self) -> bool: ...

    @property
    def status(self) -> str:
        """The ``status`` of the JSON document: ``ok`` or ``problems``."""
        return status_of(self.ok)

    @abstractmethod
    def body_json(self) -> dict[str, Any]:
        """The document without its status (what a larger document embeds)."""

    def to_json(self) -> dict[str, Any]:
        """The whole JSON document, ``status`` included."""
        return {"status": self.status, **self.body_json()}


class Report(Result):
    """A result that describes and never fails (``versions``, ``repair --undo``)."""

    @property
    def ok(self) -> bool:
        return True


class Serialisable(Protocol):
    def to_json(self) -> dict[str, Any]: ...


PlanT = TypeVar("PlanT", bound=Result)
DoneT = TypeVar("DoneT", bound=Serialisable)


@dataclass(frozen=True)
class PlanRun(Result, Generic[PlanT, DoneT]):
    """A destructive command's result: its plan and, once applied, what applying did (None
    after a dry run, or when the confirmation said no: ``declined``)."""

    plan: PlanT
    result: DoneT | None = None
    declined: bool = False

    @property
    def applied(self) -> bool:
        return self.result is not None

    def body_json(self) -> dict[str, Any]:
        out = {"applied": self.applied, **self.plan.body_json()}
        if self.result is not None:
            out["result"] = self.result.to_json()
        return out


Confirm = Callable[[Result, str], bool]
"""Asked before a destructive step, with the plan about to be carried out and a yes/no question:
the CLI shows the plan and prompts (or refuses without a terminal); None means go ahead."""
