"""Text rendering for people: one function per result type, chosen by the result's type."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from functools import singledispatch
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from rich.console import RenderableType

    from ckpt_cli.cli.output import TextRenderer
    from ckpt_cli.cli.text.fit import FitTable
    from ckpt_cli.results import PlanRun, Result, Serialisable

DoneT = TypeVar("DoneT", bound="Serialisable")


# Each module registers its result types; a run imports only the one of the result it shows
# (``ckpt versions`` need not import repartition's numpy): by the result's package.
MODULES = {
    "ckpt_cli.batches": "batches",
    "ckpt_cli.change": "repair",  # UndoResult: repair's and repartition's undo
    "ckpt_cli.cleanup": "cleanup",
    "ckpt_cli.convert": "convert",
    "ckpt_cli.delete": "delete",
    "ckpt_cli.relocate": "relocate",
    "ckpt_cli.du": "du",
    "ckpt_cli.inspect": "inspect",
    "ckpt_cli.repair": "repair",
    "ckpt_cli.repartition": "repartition",
    "ckpt_cli.replay": "replay",
    "ckpt_cli.report": "report",
    "ckpt_cli.validate": "validate",
    "ckpt_cli.versions": "versions",
}


@singledispatch
def render_text(result: object, out: TextRenderer) -> None:
    package = ".".join(type(result).__module__.split(".")[:2])
    if package in MODULES:
        importlib.import_module(f"ckpt_cli.cli.text.{MODULES[package]}")
        found = render_text.dispatch(type(result))
        if found is not _unregistered:
            found(result, out)
            return
    raise TypeError(f"no text rendering for {type(result).__name__}")


_unregistered = render_text.dispatch(object)


def load_all() -> None:
    """Register every result type's rendering (tests; a run loads only its own)."""
    for name in MODULES.values():
        importlib.import_module(f"ckpt_cli.cli.text.{name}")


CHANGE_DRY_RUN = "Dry run: nothing was changed. Add --apply to write it."


def plan_first(
    run: PlanRun[Any, DoneT],
    out: TextRenderer,
    *,
    dry_run: str = CHANGE_DRY_RUN,
    idle: bool = False,
) -> DoneT | None:
    """A destructive command's plan, unless shown before its confirmation; then, after a dry
    run of a plan with something to do (not ``idle``), the ``dry_run`` note. Returns what
    applying did (None: nothing was applied)."""
    if not out.shown(run.plan):
        out.render(run.plan)
    if run.result is None and not run.declined and not idle:
        out.console.print(f"[dim]{dry_run}[/]")
    return run.result


def print_changed(
    out: TextRenderer,
    result: Any,
    done: tuple[str, str],
    *,
    undo: str,
    change: str,
    then: Sequence[RenderableType] = (),
) -> None:
    """What applying a change that writes a batch did: ``done`` (a label, what it did), how
    ``ckpt {undo} CHECKPOINT --undo`` puts it back, ``then`` any more lines, and the verdict
    of the validation after ``change`` (its noun)."""
    from ckpt_cli.cli.text.fit import labelled

    label, what = done
    out.console.print(
        labelled(
            label,
            "green",
            f"{what}; `ckpt {undo} CHECKPOINT --undo` puts the checkpoint back (manifest: "
            f"{result.manifest}).",
        )
    )
    for line in then:
        out.console.print(line)
    print_validation(out, change, result.validation)


def print_validation(out: TextRenderer, change: str, validation: Result) -> None:
    """The verdict of the validation a change ends with, in one line."""
    verdict = validation.to_json()
    counts = verdict["counts"]
    state = "[bold green]OK[/]" if verdict["ok"] else "[bold red]NOT OK[/]"
    out.console.print(
        f"Validation after {change}: {state} ({counts['error']} errors, "
        f"{counts['warning']} warnings, {counts['info']} info)"
    )


def print_batch_plan(
    out: TextRenderer,
    plan: Any,
    provider: str,
    change: str,
    what: str,
    *,
    body: Sequence[RenderableType],
    writes: tuple[str, str],
) -> None:
    """The plan of a change that writes a batch (``convert``, ``repartition``, ``state
    delete``): the checkpoint, and ``change`` (its name) doing ``what`` as batch N+1 of version
    N+2; ``body`` (its tables); ``writes`` (a label, what the batch writes); its notes and
    warnings."""
    from ckpt_cli.cli.text.fit import labelled

    out.console.print(
        labelled(
            "Checkpoint",
            "bold",
            f"{plan.checkpoint} · {provider}, checkpoint format v{plan.checkpoint_format_version}",
        )
    )
    out.console.print(
        labelled(
            change,
            "bold",
            f"{what}: last committed batch {plan.last_committed}, {change.lower()} batch "
            f"{plan.batch}, new state version {plan.version}",
        )
    )
    for part in body:
        out.console.print(part)
    label, text = writes
    out.console.print(labelled(label, "bold", text))
    print_notes(out, plan.notes, plan.warnings)


def store_table(title: str, numbers: Sequence[str]) -> FitTable:
    """A plan's table of the state per operator and store: ``op`` and ``store``, then the
    columns ``numbers`` (right-justified)."""
    from ckpt_cli.cli.text.fit import FitTable

    table = FitTable(title=title, title_justify="left")
    table.add_column("op", justify="right")
    table.add_column("store")
    for name in numbers:
        table.add_column(name, justify="right")
    return table


def print_notes(out: TextRenderer, notes: Sequence[str], warnings: Sequence[str] = ()) -> None:
    """A plan's notes, on stdout with the plan, then its warnings (:func:`print_warnings`)."""
    from ckpt_cli.cli.output import cli_words
    from ckpt_cli.cli.text.fit import labelled

    for note in notes:
        out.console.print(labelled("note:", "yellow", cli_words(note)))
    print_warnings(warnings)


def print_warnings(warnings: Sequence[str]) -> None:
    """A plan's warnings, on stderr (stdout carries the plan), in the command line's words;
    each one line, as errors are (the terminal wraps it; logs and grep keep it whole)."""
    if not warnings:
        return
    from rich.text import Text

    from ckpt_cli.cli.common import stderr_console
    from ckpt_cli.cli.output import cli_words

    err = stderr_console()
    for warning in warnings:
        err.print(Text.assemble(("warning:", "yellow"), " ", cli_words(warning)), soft_wrap=True)
