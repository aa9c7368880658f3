"""What every operation's result offers the CLI: whether all is well, the ``status`` word of its
JSON document, and that document.

Exit codes and renderers read these three and nothing else, so a new result type needs no
change in either (see :mod:`ckpt_cli.cli.output`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

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


class Validated(Serialisable, Protocol):
    """What applying a change returns when it ends with a validation of the checkpoint."""

    @property
    def validation(self) -> Result: ...


ValidatedT = TypeVar("ValidatedT", bound=Validated)


@dataclass(frozen=True)
class ChangeRun(PlanRun[PlanT, ValidatedT]):
    """The result of a change that validates the checkpoint after it (convert, relocate,
    repartition, state delete): problems only when that validation finds them."""

    @property
    def ok(self) -> bool:
        return self.result.validation.ok if self.result is not None else True


def fields_json(obj: object, names: str, **given: Any) -> dict[str, Any]:
    """A JSON document of ``obj``'s attributes (fields or properties), in the order ``names``
    (separated by white space) gives: ``key=attribute`` where the document's key is not the
    attribute's name, and a value in ``given`` for a key whose value is worked out by the
    caller. A value with ``to_json`` becomes its document, a list or tuple a list of them."""
    return {
        key: given[key] if key in given else _json_value(getattr(obj, attribute))
        for key, attribute in _keys(names)
    }


@lru_cache
def _keys(names: str) -> tuple[tuple[str, str], ...]:
    pairs = (name.partition("=") for name in names.split())
    return tuple((key, attribute or key) for key, _, attribute in pairs)


def _json_value(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_json_value(item) for item in value]
    to_json = getattr(value, "to_json", None)
    return value if to_json is None else to_json()


class FieldsJson:
    """A dataclass whose JSON document is its fields as they are (:func:`dataclasses.asdict`)."""

    if TYPE_CHECKING:
        __dataclass_fields__: ClassVar[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


Confirm = Callable[[Result, str], bool]
"""Asked before a destructive step, with the plan about to be carried out and a yes/no question:
the CLI shows the plan and prompts (or refuses without a terminal); None means go ahead."""
