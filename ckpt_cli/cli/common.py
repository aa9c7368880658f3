"""What every command shares: options, output streams, progress, and the error boundary."""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypeVar, get_type_hints

import typer

from ckpt_cli import exit_codes
from ckpt_cli.api import Checkpoint, Storage, StorageStats
from ckpt_cli.cli.output import Renderer, cli_words, exit_code, renderer
from ckpt_cli.cli.output import write_json as write_json  # commands still import it from here
from ckpt_cli.engine import Engine, make_engine
from ckpt_cli.errors import CkptError, UsageError
from ckpt_cli.progress import NULL_PROGRESS, ProgressSink
from ckpt_cli.results import Confirm, Result
from ckpt_cli.secrets import is_secret_option, remember, remember_urls, scrub

if TYPE_CHECKING:  # rich is imported when something is printed (~40 ms, ~4 MB)
    from rich.console import Console

P = ParamSpec("P")
ResultT = TypeVar("ResultT", bound=Result)
T = TypeVar("T")

# -- shared options (one spelling for every command) -------------------------------------------

JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Write one JSON object to stdout instead of tables (indented on a terminal, one "
        "line in a pipe or file).",
    ),
]
QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", help="No progress bars or hints on stderr.")
]
StorageOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--storage-option",
        "-S",
        metavar="KEY=VALUE",
        help="Option for the filesystem (e.g. endpoint_url=..., anon=true). Repeatable.",
    ),
]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        metavar="local|spark",
        help="Where the per-partition work runs: local (this machine's cores) or spark (tasks "
        "on the active SparkSession, or one started for --master / SPARK_REMOTE).",
        show_default=True,
    ),
]
MasterOpt = Annotated[
    str | None,
    typer.Option(
        "--master",
        metavar="URL",
        help="Spark master for --engine spark when no session is active (default: local[*]).",
        show_default=False,
    ),
]
PathArg = Annotated[
    str,
    typer.Argument(
        metavar="CHECKPOINT",
        help="Checkpoint location: a local path, file://, s3://, abfs://, gs://, hdfs://...",
        show_default=False,
    ),
]


# -- options several commands spell alike, each explaining it in its own words -------------


def operator_option(help: str) -> Any:
    return typer.Option("--operator", metavar="ID", help=help, show_default=False)


def partition_option(help: str) -> Any:
    return typer.Option("--partition", "-p", metavar="N", help=help, show_default=False)


def workers_option(help: str) -> Any:
    return typer.Option("--workers", min=1, help=help, show_default=False)


def files_option(help: str) -> Any:
    return typer.Option("--files", help=help)


def manifest_option(help: str) -> Any:
    return typer.Option("--manifest", metavar="FILE", help=help, show_default=False)


def output_option(help: str, **settings: Any) -> Any:
    """``-o``: always a file (never a storage option: :func:`check_output_file`)."""
    return typer.Option("--output", "-o", metavar="FILE", help=help, **settings)


def state_var_option(help: str) -> Any:
    """``--state-var NAME``: one state variable of a transformWithState operator."""
    return typer.Option("--state-var", metavar="NAME", help=help, show_default=False)


class OptionGroup:
    """Options several commands take together, declared once as a frozen dataclass whose
    fields are the options (their ``...Opt`` types and defaults). A command names the group
    as one parameter; :func:`error_boundary` spreads its fields into the command's options at
    that place (so --help lists them there) and hands the command the group built from them."""


@dataclass(frozen=True)
class EngineOptions(OptionGroup):
    """Where a command that works per partition runs it: ``--engine`` and ``--master``."""

    engine: EngineOpt = "local"
    master: MasterOpt = None

    def make(self) -> Engine:
        return make_engine(self.engine, master=self.master)

    def distributed(self) -> Engine | None:
        """The engine when it is not this process's own (the local one works inline)."""
        return self.make() if self.engine != "local" else None


@dataclass(frozen=True)
class SharedOptions(OptionGroup):
    """The options every command ends with (its output, and how to reach the storage)."""

    json_output: JsonOpt = False
    quiet: QuietOpt = False
    storage_option: StorageOpt = None


# -- durations (--min-age and the like; the change commands' options: cli/change.py) --------

_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str, option: str = "--min-age") -> float:
    """``30s``, ``15m``, ``12h``, ``3d``, ``1w`` or plain seconds; anything else is a usage
    error (one line, exit 2)."""
    match = re.fullmatch(r"\s*(\d{1,12}(?:\.\d{1,9})?)\s*([smhdw]?)\s*", text)
    if not match:
        raise UsageError(
            f"{option} {text!r}: expected a duration like 30s, 15m, 12h, 3d, 1w or plain seconds"
        )
    return float(match.group(1)) * _UNITS[match.group(2)]


_STORAGE_OPTION_LIKE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)


def check_output_file(output: str | None, *, stdout: bool = False) -> None:
    """``-o`` was ``--storage-option`` on most commands: ``-o endpoint_url=...`` is that, not
    a file name (``./endpoint_url=...`` is one). ``-o -`` is stdout where a command can write
    there (``stdout``), and refused where it cannot, never a file named ``-``."""
    if output == "-" and not stdout:
        raise UsageError("-o -: this command writes a file, not stdout (a file named -: -o ./-)")
    if output is not None and _STORAGE_OPTION_LIKE.fullmatch(output):
        key = output.split("=")[0]
        raise UsageError(
            f"-o {key}=...: -o is the output file; storage options are -S/--storage-option "
            f"KEY=VALUE (a file of that name: -o ./{key}=...)"
        )


@dataclass
class RunState:
    """Set by the root callback and by each command, read by the error boundary."""

    debug: bool = False
    json: bool = False
    quiet: bool = False
    stats: bool = False  # --stats: report the storage requests made
    stats_reported: bool = False
    # The requests of every storage the running command opens: pass it as their stats=.
    requests: StorageStats = field(default_factory=StorageStats)


STATE = RunState()


def stdout_console() -> Console:
    from rich.console import Console

    return Console(highlight=False)


def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


# The object stores' client libraries log their failures and retries as warnings (the Azure
# SDK: each DefaultAzureCredential attempt in 12 lines), which Python prints on stderr when no
# logging is set up; ckpt says what went wrong in its own one line. --debug lets them through.
_STORE_LOGGERS = ("azure", "adlfs", "gcsfs", "google", "s3fs", "aiobotocore", "botocore")


def quiet_store_loggers(debug: bool) -> None:
    import logging

    for name in _STORE_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if debug else logging.CRITICAL + 1)


def begin(*, json_output: bool = False, quiet: bool = False) -> None:
    """Record the output mode of the running command for the error boundary."""
    STATE.json = json_output
    STATE.quiet = quiet


def parse_storage_options(values: list[str] | None) -> dict[str, Any]:
    """``KEY=VALUE`` pairs; VALUE true/false, an integer, JSON (``{...}``/``[...]``), or text.

    Options named ``*_kwargs`` (s3fs ``client_kwargs``, ``config_kwargs``...) are passed on
    as keyword arguments, so they must be JSON objects.
    """
    options: dict[str, Any] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CkptError(f"--storage-option {item.split('=')[0]!r}: expected KEY=VALUE")
        if is_secret_option(key):
            remember(value)
        lowered = value.lower()
        parsed: Any = value
        if value.lstrip()[:1] in ("{", "[") or key.endswith("_kwargs"):
            parsed = _json_option(key, value)
        elif lowered in ("true", "false"):
            parsed = lowered == "true"
        elif value.isdigit():
            parsed = int(value)
        options[key] = parsed
    return options


_JSON_TYPES = {list: "an array", str: "a string", int: "a number", float: "a number"}
_JSON_TYPES.update({bool: "true/false", type(None): "null"})


def _json_option(key: str, value: str) -> Any:
    try:
        parsed = json.loads(value)
    except (json.JSONDecodeError, RecursionError) as exc:
        problem = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise CkptError(
            f"--storage-option {key}: the value is not valid JSON ({problem})",
            hint=f"""quote it for the shell: -S '{key}={{"name": "value"}}'""",
        ) from None
    if key.endswith("_kwargs") and not isinstance(parsed, dict):
        raise CkptError(
            f"--storage-option {key}: expected a JSON object of keyword arguments, "
            f"found {_JSON_TYPES.get(type(parsed), type(parsed).__name__)}",
            hint=f"""e.g. -S '{key}={{"name": "value"}}'""",
        )
    _remember_nested(parsed)
    return parsed


def _remember_nested(value: Any) -> None:
    """Secrets inside a JSON option (``client_kwargs={"aws_secret_access_key": ...}``)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, str) and is_secret_option(str(k)):
                remember(v)
            _remember_nested(v)
    elif isinstance(value, list):
        for v in value:
            _remember_nested(v)


def _may_be_terminal(stream: Any) -> bool:
    """False when Rich would say stderr is no terminal, without importing Rich: not a tty
    and none of the variables Rich reads to be told otherwise."""
    forced = any(os.environ.get(v) for v in ("FORCE_COLOR", "TTY_COMPATIBLE"))
    return forced or bool(getattr(stream, "isatty", lambda: False)())


def progress_sink() -> ProgressSink:
    """A Rich progress bar when stderr is a terminal and the output is for humans."""
    if STATE.json or STATE.quiet or not _may_be_terminal(sys.stderr):
        return NULL_PROGRESS
    console = stderr_console()
    if not console.is_terminal:
        return NULL_PROGRESS
    from ckpt_cli.cli.progress import RichProgress

    return RichProgress(console)


@dataclass
class Session:
    """What the options every command shares set up: the output format and its renderer,
    the storage options, and the progress sink."""

    fmt: str
    storage_options: dict[str, Any]
    progress: ProgressSink
    out: Renderer

    def storage(self, location: str) -> Storage:
        return Storage.from_url(location, self.storage_options, STATE.requests)

    def open(self, location: str) -> Checkpoint:
        return Checkpoint.open(
            location, self.storage_options, progress=self.progress, stats=STATE.requests
        )

    def render(self, result: ResultT) -> ResultT:
        self.out.render(result)
        return result

    def confirm(self, *, yes: bool, action: str, unattended: str) -> Confirm:
        """Show the plan, then ask (unless ``yes``); refuse without a terminal to ask on."""

        def ask(plan: Result, question: str) -> bool:
            self.out.show(plan)
            if yes:
                return True
            if not sys.stdin.isatty():
                raise CkptError(
                    f"refusing to {action} without confirmation: stdin is not a terminal",
                    hint=f"add --yes to {unattended} unattended",
                )
            return typer.confirm(question, err=True)

        return ask


def start(shared: SharedOptions = SharedOptions(), **display: Any) -> Session:
    """The preamble of every command; ``display``: options of its text rendering."""
    begin(json_output=shared.json_output, quiet=shared.quiet)
    fmt = "json" if shared.json_output else "text"
    return Session(
        fmt, parse_storage_options(shared.storage_option), progress_sink(), renderer(fmt, **display)
    )


def given(value: T | None, problem: str) -> T:
    """The value of an option a command needs (unless --undo); a usage error saying
    ``problem`` when it is missing."""
    if value is None:
        raise UsageError(problem)
    return value


def report_error(exc: CkptError) -> None:
    """One line on stderr (and a JSON error object on stdout in --json mode)."""
    from rich.markup import escape

    err = stderr_console()
    message = scrub(cli_words(exc.message))
    hint = scrub(cli_words(exc.hint)) if exc.hint else None
    err.print(f"[bold red]error:[/] {escape(message)}", markup=True, soft_wrap=True)
    if hint and not STATE.quiet:
        err.print(f"[dim]hint:[/] {escape(hint)}", markup=True, soft_wrap=True)
    if STATE.json:
        write_json(
            {"status": "error", "errors": [{**exc.to_json(), "message": message, "hint": hint}]}
        )


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


def _debug_traceback() -> None:
    """--debug: the traceback, with every known secret masked."""
    import traceback

    sys.stderr.write(scrub(traceback.format_exc()))


StatsOpt = Annotated[
    bool,
    typer.Option(
        "--stats",
        help="Report the storage requests made (list, head, get, put/copy, delete) and bytes "
        "read: a 'requests' object in --json output, else one line on stderr.",
    ),
]


def _report_stats() -> None:
    if STATE.stats and not STATE.stats_reported:
        STATE.stats_reported = True
        stderr_console().print(STATE.requests.summary(), soft_wrap=True, markup=False)


def error_boundary(func: Callable[P, Result | None]) -> Callable[P, None]:
    """Exit with the code of the result the command returns (the one place that decides it);
    turn library errors into one line and exit code 2, no traceback unless --debug.

    Also spreads the command's option groups (:class:`OptionGroup`) into its options, and
    gives it a ``--stats`` option, reported when it ends however it ends.
    """
    signature = inspect.signature(func, eval_str=True)  # typer reads __signature__ as is
    groups = {
        p.name: p.annotation
        for p in signature.parameters.values()
        if isinstance(p.annotation, type) and issubclass(p.annotation, OptionGroup)
    }

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
        STATE.stats = bool(kwargs.pop("stats", False))
        STATE.stats_reported = False
        STATE.requests = StorageStats()  # a command counts from zero
        _remember_urls([*args, *kwargs.values()])  # before the groups hold some of them
        _gather(groups, kwargs)
        try:
            code = _guarded(func, *args, **kwargs)
        finally:
            _report_stats()
        if code is not None:
            raise typer.Exit(code)

    stats = inspect.Parameter("stats", inspect.Parameter.KEYWORD_ONLY, default=False)
    parameters = [
        spread
        for p in signature.parameters.values()
        for spread in (_group_options(p) if p.name in groups else [p])
    ]
    parameters.append(stats.replace(annotation=StatsOpt))
    wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        **{p.name: p.annotation for p in parameters},
        "return": signature.return_annotation,
    }
    return wrapper


def _group_options(param: inspect.Parameter) -> list[inspect.Parameter]:
    """The options of the group ``param`` names, in its place."""
    hints = get_type_hints(param.annotation, include_extras=True)
    return [
        param.replace(name=f.name, annotation=hints[f.name], default=f.default)
        for f in fields(param.annotation)
    ]


def _gather(groups: dict[str, type], kwargs: dict[str, Any]) -> None:
    """The groups built from their options, in ``kwargs`` (as typer passes options)."""
    for name, group in groups.items():
        if name not in kwargs:
            kwargs[name] = group(**{f.name: kwargs.pop(f.name) for f in fields(group)})


def _remember_urls(values: list[Any]) -> None:
    """Checkpoint, output and option URLs: their passwords are masked in all we print."""
    for value in values:
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str):
                remember_urls(text)


def _guarded(func: Callable[P, Result | None], *args: P.args, **kwargs: P.kwargs) -> int | None:
    """The exit code of ``func``'s result, or of its error (reported in one line); None when
    it returns nothing (its own exit stands)."""
    try:
        result = func(*args, **kwargs)
        return None if result is None else exit_code(result)
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise  # a command's own exit (--help, a declined prompt), as it is
    except BrokenPipeError:
        # The reader went away (`ckpt replay -f jsonl | head`): stop quietly, like cat.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return exit_codes.OK
    except CkptError as exc:
        if STATE.debug:
            _debug_traceback()
        report_error(exc)
        return exit_codes.ERROR
    except Exception as exc:  # the boundary: anything else is a bug, reported in one line
        if STATE.debug:
            _debug_traceback()
        report_error(
            CkptError(
                f"internal error: {type(exc).__name__}: {_first_line(exc)}",
                hint="re-run with --debug for the traceback, and report it",
            )
        )
        return exit_codes.ERROR
