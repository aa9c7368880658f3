"""Option values converted without pydantic, where that is plain.

Typer (0.2x) converts every option through a pydantic ``TypeAdapter``, built the first time
the option is parsed: importing pydantic and building ~20 adapters cost ``ckpt replay``
~0.1 s of CPU and ~9 MB before it reads anything. A well-formed ``int``, ``str``, ``bool`` or
enum value is converted here; anything else (a bad value, a bound not met, another type) goes to
Typer's own conversion, so its error messages stay the same. With a Typer that has no such
step (older ones parse with Click's types), nothing changes.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, cast, get_args, get_origin

from typer.core import TyperCommand

try:  # Typer's private coercion step (0.2x); absent in older Typers
    from typer._coercion import RuntimeParam, build_runtime_param
except ImportError:  # pragma: no cover - older Typer: nothing to speed up
    RuntimeParam = None  # type: ignore[assignment,misc]

_MISS = object()


def _leaf(annotation: Any, info: Any, value: Any) -> Any:
    """``value`` converted to ``annotation``, or ``_MISS`` for Typer to convert (or reject)."""
    if annotation in (str, bool):
        return value if isinstance(value, annotation) else _MISS
    if annotation is int:
        if type(value) is str and value.isascii() and value.removeprefix("-").isdigit():
            number = int(value)
        elif type(value) is int:
            number = value
        else:
            return _MISS
        if info.clamp or (info.min is not None and number < info.min):
            return _MISS
        return _MISS if info.max is not None and number > info.max else number
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        if isinstance(value, annotation):
            return value
        if info.case_sensitive and isinstance(value, str):
            return next((m for m in annotation if m.value == value), _MISS)
    return _MISS


def _plain(annotation: Any) -> bool:
    if get_origin(annotation) is list:
        (annotation,) = get_args(annotation)
    return annotation in (str, int, bool) or (
        isinstance(annotation, type) and issubclass(annotation, Enum)
    )


if RuntimeParam is not None:

    class _PlainParam(RuntimeParam):
        """A str/int/bool/enum option (or a list of them): converted here when well-formed."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            info, annotation = self.parameter_info, cast(Any, self.annotation)
            if get_origin(annotation) is list and isinstance(value, (list, tuple)):
                (item_type,) = get_args(annotation)
                items = [_leaf(item_type, info, v) for v in value]
                if all(item is not _MISS for item in items):
                    return items
            elif get_origin(annotation) is not list:
                got = _leaf(annotation, info, value)
                if got is not _MISS:
                    return got
            typer_param = build_runtime_param(param.type_descriptor)
            return typer_param._coerce_value(value, param=param, ctx=ctx)


def convert_plainly(command: Any) -> None:
    """Let ``command``'s (and its subcommands') plain options skip Typer's pydantic step."""
    for param in getattr(command, "params", ()):
        convert_param(param)
    for sub in getattr(command, "commands", {}).values():
        convert_plainly(sub)


def convert_param(param: Any) -> None:
    """``param`` converted here when it is plain (and Typer has a pydantic step)."""
    descriptor = getattr(param, "type_descriptor", None)
    if (
        RuntimeParam is not None
        and descriptor is not None
        and getattr(param, "_runtime_param", False) is None
        and descriptor.file_annotation is None
        and descriptor.parameter_info.parser is None
        and _plain(descriptor.annotation)
    ):
        param._runtime_param = _PlainParam(
            parameter_info=descriptor.parameter_info, annotation=descriptor.annotation
        )


class CkptCommand(TyperCommand):
    """A ``ckpt`` command: its ``--help`` option (made per run) converted plainly too, and its
    help reflowed at the terminal's width (:mod:`ckpt_cli.cli.helptext`)."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        convert_param(option)
        return option

    def format_help(self, ctx: Any, formatter: Any) -> None:
        from ckpt_cli.cli.helptext import print_help

        print_help(self, ctx)
