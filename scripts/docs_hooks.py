"""MkDocs hooks: the reference pages' generated parts, made from the code at build time.

A page asks for a part with an HTML comment on a line of its own:

- ``<!-- ckpt:command NAME -->``: the usage, description, arguments and options of
  ``ckpt NAME``, from the Click command Typer builds (what ``ckpt NAME --help`` shows);
- ``<!-- ckpt:root -->``: the root command's usage, options and its commands;
- ``<!-- ckpt:codes -->``: the finding codes, severities and hints of ``validate/codes.py``;
- ``<!-- ckpt:exit-codes -->``: the exit codes of ``exit_codes.py`` with their docstrings;
- ``<!-- ckpt:api-methods -->``: each command method of ``ckpt_cli.Checkpoint`` and the
  library function it is.

The build fails (``PluginError``) on an unknown part, and when a command of the CLI has no
page: a new command or option cannot go undocumented. tests/test_docs.py checks the result.
"""

from __future__ import annotations

import ast
import html
import importlib
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

REPO = Path(__file__).resolve().parent.parent
PLACEHOLDER = re.compile(r"^<!-- ckpt:(?P<part>[a-z-]+)(?: (?P<arg>\S+))? -->$", re.M)

_documented: set[str] = set()

# The reference documents the tree it is built from, whatever ckpt is installed.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _cli() -> Any:
    """The ``ckpt`` Click group with every command (Typer's own copy of Click, whatever
    the Typer version)."""
    import typer.main

    from ckpt_cli.cli import make_app

    return typer.main.get_command(make_app())


def _helptext() -> Any:
    """The CLI's own help renderer (``ckpt_cli/cli/helptext.py``) when this tree has it: the
    reference then shows the option labels and notes ``--help`` shows. Else None: Typer's."""
    try:
        return importlib.import_module("ckpt_cli.cli.helptext")
    except ImportError:
        return None


def _plain(text: str) -> str:
    """Help text as the terminal shows it: plain with the CLI's own renderer, else Rich
    markup, as Typer reads it."""
    if _helptext() is not None:
        return text
    from rich.errors import MarkupError
    from rich.text import Text

    try:
        return Text.from_markup(text).plain
    except MarkupError:
        return text


def _help_blocks(text: str) -> str:
    """A help text as HTML: paragraphs unwrapped, indented lines (examples) as code."""
    out = []
    for block in re.split(r"\n\s*\n", _plain(text).strip()):
        lines = block.split("\n")
        if all(line.startswith("  ") for line in lines):
            code = "\n".join(line.strip() for line in lines)
            out.append(f'<pre class="ckpt-example"><code>{html.escape(code)}</code></pre>')
        elif re.fullmatch(r"Examples:?", block.strip()):
            out.append("<p><strong>Examples</strong></p>")
        else:
            joined = " ".join(line.strip() for line in lines)
            out.append(f"<p>{html.escape(joined)}</p>")
    # Consecutive examples (one per paragraph in the help) read as one block.
    return re.sub(r"</code></pre>\n<pre class=\"ckpt-example\"><code>", "\n", "\n".join(out))


def _usage(command: Any, ctx: Any) -> str:
    # Typer writes a required argument as {NAME}; Click's convention, and --help's, is NAME.
    usage = str(command.get_usage(ctx)).replace("{", "").replace("}", "")
    return re.sub(r"^Usage:\s*", "", usage.strip())


def _param_record(param: Any, ctx: Any) -> tuple[str, str]:
    """The option's names with its value's name, and its help with its notes (default,
    bounds), as ``--help`` shows them."""
    helptext = _helptext()
    if helptext is not None and hasattr(helptext, "_label") and hasattr(helptext, "_notes"):
        notes = helptext._notes(param)
        help_text = " ".join((getattr(param, "help", None) or "").split())
        if notes:
            help_text += f" [{'; '.join(notes)}]"
        return str(helptext._label(param)), help_text
    names, help_text = param.get_help_record(ctx)
    return str(names), str(help_text)


def _params_table(command: Any, ctx: Any) -> str:
    rows = []
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        names, help_text = _param_record(param, ctx)
        anchor = f"opt-{param.name}"
        rows.append(
            f'<tr id="{html.escape(ctx.info_name)}-{anchor}">'
            f"<td><code>{html.escape(names)}</code></td>"
            f"<td>{html.escape(_plain(help_text))}</td></tr>"
        )
    if not rows:
        return ""
    # Material styles tables without a class; docs/assets/extra.css keeps names whole.
    return (
        '<div class="ckpt-options">\n<table>\n<thead><tr><th>argument or option</th>'
        "<th>meaning</th></tr></thead>\n<tbody>\n"
        + "\n".join(rows)
        + "\n</tbody>\n</table>\n</div>"
    )


# Commands that are groups: their pages are per subcommand, named ``<group>-<subcommand>``.
_GROUPS = ("state",)


def command_part(name: str) -> str:
    """``ckpt NAME``'s usage, help and parameters, as Markdown with HTML blocks."""
    from typer._click import Context

    group = _cli()
    first, *rest = name.split("-") if name.split("-")[0] in _GROUPS else [name]
    if first not in group.commands:
        raise PluginError(
            f"docs: ckpt has no command {name!r} (commands: {sorted(group.commands)})"
        )
    command = group.commands[first]
    ctx = Context(command, info_name=first, parent=Context(group, info_name="ckpt"))
    for sub in rest:  # a command of a group (ckpt state delete: "state-delete")
        command = command.commands[sub]
        ctx = Context(command, info_name=sub, parent=ctx)
    _documented.add(first)
    return "\n\n".join(
        [
            "## Usage",
            f"```text\n{_usage(command, ctx)}\n```",
            _help_blocks(command.help or ""),
            "## Arguments and options",
            _params_table(command, ctx),
        ]
    )


def _first_sentence(text: str) -> str:
    first = re.split(r"\n\s*\n", _plain(text).strip())[0]
    return " ".join(first.split())


def _md(text: str) -> str:
    """Text for a Markdown table cell: ``|`` and ``<`` escaped outside code spans."""
    pieces = re.split(r"(`[^`]*`)", text)
    return "".join(
        piece if piece.startswith("`") else piece.replace("|", r"\|").replace("<", "&lt;")
        for piece in pieces
    )


def root_part() -> str:
    """The root command: usage, its own options and the table of commands."""
    from typer._click import Context

    group = _cli()
    ctx = Context(group, info_name="ckpt")
    commands = ["| command | what it does |", "|---|---|"]
    for name, command in group.commands.items():
        subs = getattr(command, "commands", None) if name in _GROUPS else None
        for sub, inner in (subs or {None: command}).items():
            full, page = (f"{name} {sub}", f"{name}-{sub}") if sub else (name, name)
            commands.append(
                f"| [`ckpt {full}`]({page}.md) | {_md(_first_sentence(inner.help or ''))} |"
            )
    return "\n\n".join(
        [
            "## Usage",
            f"```text\n{_usage(group, ctx)}\n```",
            _help_blocks(group.help or ""),
            "## Commands",
            "\n".join(commands),
            "## Options of `ckpt` itself",
            "These come before the command: `ckpt --debug validate CHECKPOINT`.",
            _params_table(group, ctx),
        ]
    )


def codes_part() -> str:
    """Every finding code with its default severity and hint."""
    from ckpt_cli.validate.codes import CODES

    rows = ["| code | severity | hint |", "|---|---|---|"]
    for code, (severity, hint) in sorted(CODES.items()):
        rows.append(f'| <span id="{code}"></span>`{code}` | {severity} | {_md(hint)} |')
    return "\n".join(rows)


def exit_codes_part() -> str:
    """The exit codes of ``ckpt_cli/exit_codes.py``, each with the docstring under it."""
    tree = ast.parse((REPO / "ckpt_cli" / "exit_codes.py").read_text())
    rows = ["| exit code | name | meaning |", "|---|---|---|"]
    body = tree.body
    for node, after in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
        ):
            doc = " ".join(str(after.value.value).split())
            rows.append(f"| {node.value.value!s} | `{node.targets[0].id}` | {_md(doc)} |")
    return "\n".join(rows)


def api_methods_part() -> str:
    """Each command method of ``ckpt_cli.Checkpoint`` with the library function it is (the
    function's own reference under it: the signature and docstring the method has)."""
    from ckpt_cli.api import methods

    out = []
    for name, call in methods().items():
        fn = call.function
        target = f"{fn.__module__}.{fn.__qualname__}"
        out += [
            f"### `Checkpoint.{name}`",
            "",
            f"`ckpt.{name}(...)` is `{target}` with the checkpoint"
            + (" (its storage)" if call.via_storage else "")
            + " as its first argument:",
            "",
            f"::: {target}",
            "    options:",
            "      show_root_heading: true",
            "      heading_level: 4",
            "",
        ]
    return "\n".join(out)


def _part(part: str, arg: str | None) -> str:
    if part == "command" and arg:
        return command_part(arg)
    if part == "root" and arg is None:
        return root_part()
    if part == "codes" and arg is None:
        return codes_part()
    if part == "exit-codes" and arg is None:
        return exit_codes_part()
    if part == "api-methods" and arg is None:
        return api_methods_part()
    raise PluginError(f"docs: unknown generated part <!-- ckpt:{part} {arg or ''} -->")


def on_config(config: Any) -> Any:
    _documented.clear()
    return config


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    return PLACEHOLDER.sub(lambda m: _part(m["part"], m["arg"]), markdown)


def on_post_build(config: Any) -> None:
    missing = sorted(set(_cli().commands) - _documented)
    if missing:
        raise PluginError(
            f"docs: no reference page for ckpt {', '.join(missing)}: add "
            "docs/reference/commands/<name>.md with <!-- ckpt:command <name> --> (and nav)"
        )


_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):`(~?)([\w.]+)`")


def _roles_as_code(text: str) -> str:
    """Sphinx roles (``:class:`~ckpt_cli.core.model.Checkpoint```) as Markdown code spans, with
    the short name where Sphinx would show it (``~``)."""
    return _ROLE.sub(lambda m: f"`{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}`", text)


try:
    import griffe
except ImportError:  # only the API pages need it; the hooks above work without
    pass
else:

    class SphinxRoles(griffe.Extension):
        """Griffe extension (mkdocs.yml): docstrings' Sphinx roles read as code, so the API
        pages show ``Checkpoint``, not ``:class:`~ckpt_cli.core.model.Checkpoint```."""

        def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
            if obj.docstring is not None:
                obj.docstring.value = _roles_as_code(obj.docstring.value)

    class MadeFunctions(griffe.Extension):
        """Griffe extension (mkdocs.yml): a module's attribute that is at run time a function
        of that module made by a factory (``undo_convert = batch_change_undo(...)``) is
        documented as the function it is (its signature and docstring, by inspection)."""

        def on_module_members(self, *, mod: griffe.Module, agent: Any, **kwargs: Any) -> None:
            made = [
                name
                for name, member in mod.members.items()
                if isinstance(member, griffe.Attribute)
                and isinstance(member.value, griffe.ExprCall)
            ]
            if not made:
                return
            try:
                module = importlib.import_module(mod.path)
            except ImportError:  # an optional extra's module: documented as it reads
                return
            inspected = None
            for name in made:
                obj = getattr(module, name, None)
                if getattr(obj, "__qualname__", None) != name or obj.__module__ != mod.path:
                    continue
                if inspected is None:
                    inspected = griffe.inspect(
                        mod.path,
                        docstring_parser=agent.docstring_parser,
                        docstring_options=agent.docstring_options,
                    )
                found = inspected[name]
                found.lineno = mod.members[name].lineno
                found.endlineno = mod.members[name].endlineno
                mod.set_member(name, found)
