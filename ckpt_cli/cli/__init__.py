"""The ``ckpt`` command line: parses arguments, calls the library, renders the result."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable
from typing import Annotated, Any

import typer

from ckpt_cli.cli.coercion import CkptCommand
from ckpt_cli.cli.common import STATE, quiet_store_loggers
from ckpt_cli.cli.helptext import unwrap
from ckpt_cli.cli.usage import CkptGroup
from ckpt_cli.version import __version__

# Each command: its module under ckpt_cli/cli/ and function ("module:function", as in entry
# points). A run imports only its own command's module (`ckpt versions` does not import
# replay's or repartition's CLI); help and completion import them all.
COMMANDS = {
    "versions": "versions:versions",
    "batches": "batches:batches",
    "du": "du:du",
    "inspect": "inspect:inspect",
    "validate": "validate:validate_command",
    "replay": "replay:replay",
    "orphans": "cleanup:orphans",
    "cleanup": "cleanup:cleanup",
    "repair": "repair:repair",
    "repartition": "repartition:repartition",
    "convert": "convert:convert",
    "relocate": "relocate:relocate",
    "report": "report:report",
    "state": "state:app",  # a group (ckpt state delete): Typer lists groups last
}


def make_app(commands: Iterable[str] = COMMANDS) -> typer.Typer:
    """The ``ckpt`` app with these of :data:`COMMANDS` (all by default)."""
    app = typer.Typer(
        name="ckpt",
        cls=CkptGroup,  # usage errors as one line (and a JSON object with --json), exit 2
        help=(
            "Inspect, validate, replay and clean Spark Structured Streaming checkpoints.\n\n"
            "CHECKPOINT is the query's checkpointLocation: a local path or a URL "
            "(file://, s3://, abfs://, memory://).\n\n"
            "Output: tables for people, the same on a terminal and in a pipe or file; --json on "
            "every command for programs (indented on a terminal, one line in a pipe or file); "
            "ckpt du --tsv for sort, awk and cut.\n\n"
            "Exit codes: 0 ok, 1 problems found, 2 could not run."
        ),
        no_args_is_help=True,
        add_completion=True,  # --install-completion, --show-completion (bash, zsh, fish)
        pretty_exceptions_show_locals=False,
        context_settings={"help_option_names": ["-h", "--help"]},
        rich_markup_mode="rich",
    )
    app.callback()(root)
    for name in commands:
        module, _, function = COMMANDS[name].partition(":")
        command = getattr(importlib.import_module(f"ckpt_cli.cli.{module}"), function)
        if isinstance(command, typer.Typer):  # a group of commands (ckpt state delete)
            app.add_typer(command, name=name)
            continue
        # Each paragraph on one line: help reflows it at the terminal's width.
        app.command(name=name, cls=CkptCommand, help=unwrap(command.__doc__))(command)
    return app


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ckpt {__version__}")
        raise typer.Exit()


def root(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks of errors (secrets stay hidden).")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Inspect, validate, replay and clean Spark Structured Streaming checkpoints."""
    STATE.debug = debug
    STATE.json = False
    STATE.quiet = False
    quiet_store_loggers(debug)


def __getattr__(name: str) -> Any:
    # ``from ckpt_cli.cli import app``: the app with every command, made on first use.
    if name == "app":
        app = globals()["app"] = make_app()
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _commands_in(argv: list[str]) -> Iterable[str]:
    """Only the command named on the command line, when it names one (the first word that
    is not an option: the root's options take no value); none for ``ckpt --version``; else
    every command."""
    first = next((a for a in argv if not a.startswith("-")), None)
    if first is None and "--version" in argv:
        return ()  # the root's --version prints and exits before any command is needed
    return (first,) if first in COMMANDS else COMMANDS


def main() -> None:
    # Arrow's default allocator (mimalloc) keeps freed pages: replay's columnar batches peak
    # ~17% lower on malloc. Set before pyarrow is imported (lazily, by replay).
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    make_app(_commands_in(sys.argv[1:]))()
