"""Usage errors (an unknown option, a missing argument, a bad value) in ckpt's own form: one
line on stderr and exit 2, plus the JSON error object on stdout with ``--json``, instead of
Click's boxed usage text."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from ckpt_cli import exit_codes
from ckpt_cli.cli.coercion import convert_param, convert_plainly
from ckpt_cli.errors import UsageError

try:  # Typer 0.2x parses with its own copy of Click, whose errors derive from this
    from typer import TyperException as ParseError
except ImportError:  # older Typer: Click itself
    from click import ClickException as ParseError  # type: ignore[assignment]


class CkptGroup(TyperGroup):
    """The ``ckpt`` command group: Typer's, but with ckpt's usage errors."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        convert_param(option)  # made per run: see ckpt_cli.cli.coercion
        return option

    def format_help(self, ctx: Any, formatter: Any) -> None:
        from ckpt_cli.cli.helptext import print_help

        print_help(self, ctx)

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        convert_plainly(self)
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        argv = list(sys.argv[1:] if args is None else args)
        try:
            # Not standalone: Click's errors reach us instead of being printed in a box.
            code = super().main(argv, prog_name, complete_var, False, **extra)
        except ParseError as exc:  # UsageError, BadParameter, NoSuchOption...
            if type(exc).__name__ == "NoArgsIsHelpError":  # bare `ckpt`: Typer's help
                return super().main(argv, prog_name, complete_var, True, **extra)
            json_output = "--json" in argv[: _end_of_options(argv)]
            old = old_spelling(exc, argv)
            if old is not None:
                one_line_error(old, json_output=json_output)
            usage_error(exc, json_output=json_output)
        except typer.Abort:
            typer.echo("Aborted.", err=True)
            sys.exit(exit_codes.PROBLEMS)
        # A command ends by raising its exit code, which non-standalone Click returns.
        sys.exit(code if isinstance(code, int) else exit_codes.OK)


def _end_of_options(argv: list[str]) -> int:
    return argv.index("--") if "--" in argv else len(argv)


# Spellings of ckpt 0.x before each flag had one meaning, that a user would still type, and
# what they are now: (command, option) -> the problem; command None: every command. ``{value}``
# is what followed the option (never shown for -o: it may be a secret).
OLD_SPELLINGS: dict[tuple[str | None, str], str] = {
    (None, "-o"): "-o is the output file (of replay and report); storage options are "
    "-S/--storage-option KEY=VALUE",
    ("repartition", "-p"): "-p {value}: did you mean --partitions {value}? (-p filters partitions)",
    ("replay", "--version"): "--version {value}: did you mean --state-version {value}? "
    "(--version is ckpt's own: ckpt --version)",
    ("cleanup", "--undo"): "cleanup has no --undo: it deletes for good (its manifest lists what "
    "it deleted)",
}


def old_spelling(exc: ParseError, argv: list[str]) -> str | None:
    """The one line for an option that is not there because it is spelled differently now."""
    option = getattr(exc, "option_name", None)
    ctx = getattr(exc, "ctx", None)
    if type(exc).__name__ != "NoSuchOption" or not option or ctx is None:
        return None
    name = ctx.info_name
    problem = OLD_SPELLINGS.get((name, option)) or OLD_SPELLINGS.get((None, option))
    if problem is None:
        return None
    return f"{ctx.command_path}: " + problem.format(value=_value_of(option, argv) or "N")


def _value_of(option: str, argv: list[str]) -> str | None:
    """What followed ``option`` on the command line (``-p 3``, ``-p3``, ``--version=3``)."""
    for i, arg in enumerate(argv[: _end_of_options(argv)]):
        if arg == option:
            following = argv[i + 1] if i + 1 < len(argv) else None
            return None if following is None or following.startswith("-") else following
        if arg.startswith(option + "="):
            return arg[len(option) + 1 :]
        if not option.startswith("--") and arg.startswith(option) and len(arg) > len(option):
            return arg[len(option) :]
    return None


def one_line_error(message: str, *, json_output: bool) -> NoReturn:
    from ckpt_cli.cli.common import STATE, report_error

    STATE.json = json_output
    STATE.quiet = True
    report_error(UsageError(message))
    sys.exit(exit_codes.ERROR)


def usage_error(exc: ParseError, *, json_output: bool) -> NoReturn:
    """One line naming the command and the problem, with where to read more; exit 2."""
    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "ckpt"
    problem = " ".join(exc.format_message().split())  # Click's suggestions on one line too
    problem = problem[:1].lower() + problem[1:].rstrip(".")
    # The one line says where the help is: no hint line.
    one_line_error(f"{command}: {problem} (see {command} --help)", json_output=json_output)
