"""``--help`` for people, reflowed at the terminal's width.

The docstrings are wrapped in the source (at 100 columns); here each paragraph becomes one line
again, so Rich can fill it to the width of the terminal instead of breaking the source's lines
into fragments. Indented paragraphs (the examples) keep their lines. Nothing in a help text is
Rich markup: ``pip install 'spark-ckpt[report]'`` shows its ``[report]``. Options are one
column of names with their value's name (``--output, -o FILE``; nothing after a flag) and one
of help, with the default and bounds after it.
"""

from __future__ import annotations

import inspect
from enum import Enum
from typing import TYPE_CHECKING, Any, get_args, get_origin

if TYPE_CHECKING:
    from rich.console import Console, RenderableType


def unwrap(doc: str | None) -> str:
    """``doc`` with each paragraph on one line; indented paragraphs kept as they are."""
    paragraphs = inspect.cleandoc(doc or "").split("\n\n")
    out = []
    for paragraph in paragraphs:
        lines = paragraph.splitlines()
        if lines and all(line.startswith(" ") for line in lines):
            out.append(paragraph)
        else:
            out.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(out)


def first_paragraph(doc: str | None) -> str:
    return unwrap(doc).split("\n\n")[0]


def _value_name(param: Any) -> str | None:
    """What follows the option on the command line: its metavar, an enum's choices, or a
    name for its type; None for a flag (it takes no value) and an argument (its name is)."""
    if getattr(param, "is_flag", False) or param.param_type_name == "argument":
        return None
    if param.metavar:
        return str(param.metavar)
    descriptor = getattr(param, "type_descriptor", None)
    annotation: Any = getattr(descriptor, "annotation", str)
    if get_origin(annotation) is list:
        (annotation,) = get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return str(param.opts[0]).lstrip("-").upper()  # its choices are in the notes
    if annotation is int:
        return "N"
    if annotation is float:
        return "NUMBER"
    return "PATH" if getattr(annotation, "__name__", "") == "Path" else "TEXT"


def _label(param: Any) -> str:
    if param.param_type_name == "argument":
        return str(param.metavar or param.name.upper())
    longs = [o for o in param.opts if o.startswith("--")]
    shorts = [o for o in param.opts if not o.startswith("--")]
    names = ", ".join(longs + shorts)
    if param.secondary_opts:
        names += " / " + ", ".join(param.secondary_opts)
    value = _value_name(param)
    return f"{names} {value}" if value else names


def _notes(param: Any) -> list[str]:
    """The choices, the default (when it says something), bounds, required."""
    notes = []
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        notes.append("one of " + ", ".join(str(m.value) for m in annotation))
    default = param.default
    if isinstance(default, Enum):
        default = default.value
    if param.show_default is not False and default not in (None, False, (), []):
        if getattr(param, "is_flag", False):
            if param.secondary_opts:  # --flatten/--no-flatten: the one that is on
                notes.append(f"default: {param.opts[0] if default else param.secondary_opts[0]}")
        else:
            notes.append(f"default: {default}")
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if low is not None and high is not None:
        notes.append(f"{low} to {high}")
    elif low is not None:
        notes.append(f">= {low}")
    elif high is not None:
        notes.append(f"<= {high}")
    if param.required and param.param_type_name != "argument":
        notes.append("required")
    return notes


def _param_help(param: Any) -> RenderableType:
    from rich.text import Text

    text = Text(" ".join((getattr(param, "help", None) or "").split()))
    notes = _notes(param)
    if notes:
        if text:
            text.append(" ")
        text.append(f"[{'; '.join(notes)}]", style="dim")
    return text


def _panel(title: str, rows: list[tuple[str, RenderableType]], label_style: str) -> Any:
    from rich import box
    from rich.panel import Panel
    from rich.table import Table

    table = Table(box=None, show_header=False, padding=(0, 1), pad_edge=False, expand=True)
    table.add_column(no_wrap=True, style=label_style)
    table.add_column(ratio=1)
    for label, help_text in rows:
        table.add_row(label, help_text)
    return Panel(table, title=title, title_align="left", border_style="dim", box=box.ROUNDED)


def _description(doc: str) -> list[RenderableType]:
    from rich.padding import Padding
    from rich.text import Text

    out: list[RenderableType] = []
    for i, paragraph in enumerate(unwrap(doc).split("\n\n")):
        indented = paragraph.startswith(" ")
        style = "" if i == 0 or indented else "dim"
        out.append(Padding(Text(paragraph, style=style), (0, 0, 1, 1), expand=False))
    return out


def print_help(command: Any, ctx: Any, console: Console | None = None) -> None:
    """The help of ``command`` (a Click command or group) in context ``ctx``."""
    from rich.console import Console
    from rich.padding import Padding
    from rich.text import Text

    console = console or Console(highlight=False)
    # Typer writes a required argument as {NAME}; Click's convention is NAME.
    usage = command.get_usage(ctx).replace("{", "").replace("}", "")
    console.print(Padding(Text(usage, style="bold"), (1, 1, 1, 1), expand=False))
    for part in _description(command.help or ""):
        console.print(part)
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    arguments = [(_label(p), _param_help(p)) for p in params if p.param_type_name == "argument"]
    options = [(_label(p), _param_help(p)) for p in params if p.param_type_name == "option"]
    if arguments:
        console.print(_panel("Arguments", arguments, "bold"))
    if options:
        console.print(_panel("Options", options, "bold cyan"))
    commands = getattr(command, "commands", None)
    if commands:
        rows: list[tuple[str, RenderableType]] = []
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                rows.append((name, Text(sub.short_help or first_paragraph(sub.help))))
        console.print(_panel("Commands", rows, "bold cyan"))
