"""The one output layer: a result goes to a renderer chosen by name, and its exit code comes
from the result alone.

A command parses its options, calls the library, and hands the result to ``render``; the
error boundary (:func:`ckpt_cli.cli.common.error_boundary`) turns the returned result into the
exit code. Renderers only render: ``text`` (Rich, for people), ``json`` (one document on
stdout, keys sorted) and ``junit`` (a JUnit XML file for CI, for ``validate``).
"""

from __future__ import annotations

import json
import re
import sys
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ckpt_cli import exit_codes
from ckpt_cli.errors import CkptError
from ckpt_cli.results import Result

if TYPE_CHECKING:  # rich is imported when something is printed (~40 ms, ~4 MB)
    from rich.console import Console

# The library names its parameters (``min_age=0s``, ``force=True``); on the command line they
# are options.
_PARAMETERS = {
    "min_age=": "--min-age ",
    "retain=": "--retain ",
    "rollback_to=": "--rollback-to ",
    "force=True": "--force",
    "break_lock=True": "--break-lock",
    "snapshot=True": "--snapshot",
    "all_versions=True": "--all-versions",
    "best_effort=True": "--best-effort",
    "engine=": "--engine ",
    "storage_options": "--storage-option",
    "state_var=": "--state-var ",
    "timers=True": "--timers",
}
_PARAMETER_RE = re.compile(r"\b(" + "|".join(re.escape(p) for p in _PARAMETERS) + ")")


def cli_words(text: str) -> str:
    """A library message in the command line's words: its parameters as options."""
    return _PARAMETER_RE.sub(lambda m: _PARAMETERS[m.group(1)], text)


def exit_code(result: Result) -> int:
    """0 when the result is ok, 1 when it found problems (errors exit 2 in the boundary)."""
    return exit_codes.OK if result.ok else exit_codes.PROBLEMS


def write_json(obj: dict[str, Any]) -> None:
    from ckpt_cli.cli.common import STATE

    if STATE.stats:
        obj = {**obj, "requests": STATE.requests.to_json()}
        STATE.stats_reported = True
    # Never through Rich: it wraps lines and interprets markup. Indented for a person at a
    # terminal; one line for a program (a pipe, a file).
    if _is_terminal(sys.stdout):
        text = json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False)
    else:
        text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed, or no isatty (a test's buffer)
        return False


class Renderer(Protocol):
    def show(self, result: Result) -> None:
        """A step on the way (a plan before its confirmation): shown now to people, left out
        of machine output, which is one document of the final result."""

    def render(self, result: Result) -> None:
        """The command's result."""


class TextRenderer:
    """Rich tables on stdout (notes on stderr); ``options`` are the command's display options
    (``show_files``, ``title``...)."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self._shown: list[object] = []

    @cached_property
    def console(self) -> Console:
        from rich.console import Console

        return Console(highlight=False)

    def shown(self, part: object) -> bool:
        """Whether ``part`` was shown already (a plan shown before its confirmation)."""
        return any(part is s for s in self._shown)

    def show(self, result: Result) -> None:
        if not self.shown(result):
            self.render(result)

    def render(self, result: Result) -> None:
        from ckpt_cli.cli.text import render_text

        self._shown.append(result)
        render_text(result, self)


class JsonRenderer:
    def __init__(self, **options: Any) -> None:
        pass

    def show(self, result: Result) -> None:
        return None

    def render(self, result: Result) -> None:
        write_json(result.to_json())


class JunitRenderer:
    """A JUnit XML report of a validation, written to ``target`` (CI systems read it)."""

    def __init__(self, *, target: Path, **options: Any) -> None:
        self.target = target

    def show(self, result: Result) -> None:
        return None

    def render(self, result: Result) -> None:
        from ckpt_cli.api import ValidationReport
        from ckpt_cli.cli.junit import junit_xml

        if not isinstance(result, ValidationReport):
            raise CkptError(f"{self.target}: a JUnit report is made of a validation only")
        try:
            self.target.write_text(junit_xml(result))
        except OSError as exc:
            raise CkptError(
                f"{self.target}: cannot write the JUnit report: {exc.strerror}"
            ) from exc


RENDERERS: dict[str, type[TextRenderer] | type[JsonRenderer] | type[JunitRenderer]] = {
    "text": TextRenderer,
    "json": JsonRenderer,
    "junit": JunitRenderer,
}


def renderer(name: str, **options: Any) -> Renderer:
    return RENDERERS[name](**options)


def render(result: Result, fmt: str, **options: Any) -> None:
    """Render ``result`` once with the renderer named ``fmt``."""
    renderer(fmt, **options).render(result)
