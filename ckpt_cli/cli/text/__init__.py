"""Text rendering for people: one function per result type, chosen by the result's type."""

from __future__ import annotations

from functools import singledispatch
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ckpt_cli.cli.output import TextRenderer
    from ckpt_cli.results import Result


@singledispatch
def render_text(result: object, out: TextRenderer) -> None:
    raise TypeError(f"no text rendering for {type(result).__name__}")


def plan_first(plan: Result, out: TextRenderer, *, applied: bool, dry_run: str) -> None:
    """A destructive command's plan, unless shown before its confirmation; then, when nothing
    was applied, the ``dry_run`` note (if any)."""
    if not out.shown(plan):
        out.render(plan)
    if not applied and dry_run:
        out.console.print(f"[dim]{dry_run}[/]")


# Each module registers its result types.
from ckpt_cli.cli.text import (  # noqa: E402
    batches,
    cleanup,
    du,
    files,
    repair,
    repartition,
    report,
    validate,
    versions,
)

__all__ = [
    "batches",
    "cleanup",
    "du",
    "files",
    "render_text",
    "repair",
    "repartition",
    "report",
    "validate",
    "versions",
]
