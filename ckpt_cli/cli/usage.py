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
            usage_error(exc, json_output="--json" in argv[: _end_of_options(argv)])
        except typer.Abort:
            typer.echo("Aborted.", err=True)
            sys.exit(exit_codes.PROBLEMS)
        # A command ends with typer.Exit(code), which non-standalone Click returns.
        sys.exit(code if isinstance(code, int) else exit_codes.OK)


def _end_of_options(argv: list[str]) -> int:
    return argv.index("--") if "--" in argv else len(argv)


def usage_error(exc: ParseError, *, json_output: bool) -> NoReturn:
    """One line naming the command and the problem, with where to read more; exit 2."""
    from ckpt_cli.cli.common import STATE, report_error

    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "ckpt"
    problem = " ".join(exc.format_message().split())  # Click's suggestions on one line too
    problem = problem[:1].lower() + problem[1:].rstrip(".")
    STATE.json = json_output
    STATE.quiet = True  # the one line says where the help is: no hint line
    report_error(UsageError(f"{command}: {problem} (see {command} --help)"))
    sys.exit(exit_codes.ERROR)
