"""The documentation site builds with ``mkdocs build --strict`` (a broken link, anchor or
reference fails), and its generated reference holds every command, option and finding code
of the code it was built from."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import typer.main

from ckpt_cli.cleanup.plan import CLASSES
from ckpt_cli.cli import make_app
from ckpt_cli.validate.codes import CODES
from tests.conftest import REPO


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return out


def page(site: Path, path: str) -> str:
    return (site / path / "index.html").read_text()


def cli() -> Any:
    return typer.main.get_command(make_app())


def text_of(markup: str) -> str:
    """The page's text as a reader sees it (tags dropped, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


def leaf_commands() -> dict[str, Any]:
    """Every command by its name, a group's by ``<group> <command>`` (``state delete``)."""
    found = {}
    for name, command in cli().commands.items():
        for sub, inner in (getattr(command, "commands", None) or {"": command}).items():
            found[f"{name} {sub}".strip()] = inner
    return found


@pytest.mark.parametrize("name", sorted(leaf_commands()))
def test_every_command_and_option_is_in_its_reference_page(site: Path, name: str) -> None:
    command = leaf_commands()[name]
    text = text_of(page(site, f"reference/commands/{name.replace(' ', '-')}"))
    assert f"ckpt {name}" in text
    first_line = (command.help or "").strip().split("\n")[0]
    assert " ".join(first_line.split()) in " ".join(text.split())
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        for spelling in [*param.opts, *param.secondary_opts]:
            if spelling.startswith("-"):
                assert re.search(rf"(?<![\w-]){re.escape(spelling)}(?![\w-])", text), (
                    f"ckpt {name}: {spelling} is not in the reference"
                )
            else:  # an argument: its metavar
                assert (param.metavar or spelling.upper()) in text


def test_the_commands_page_has_every_command_and_the_root_options(site: Path) -> None:
    text = text_of(page(site, "reference/commands"))
    group = cli()
    for name in group.commands:
        assert f"ckpt {name}" in text
    for param in group.params:
        for spelling in param.opts:
            assert spelling in text


def test_every_finding_code_is_in_the_codes_page_with_its_severity(site: Path) -> None:
    rows = re.findall(
        r'<td><span id="(\w+)"></span><code>\1</code></td>\s*<td>(\w+)</td>',
        page(site, "reference/codes"),
    )
    assert dict(rows) == {code: severity for code, (severity, _) in CODES.items()}


def test_every_cleanup_class_is_in_the_cleanup_page(site: Path) -> None:
    text = text_of(page(site, "reference/commands/cleanup"))
    missing = [name for name in CLASSES if name not in text]
    assert not missing


def test_the_exit_codes_page_has_the_three_codes(site: Path) -> None:
    rows = re.findall(
        r"<td>(\d)</td>\s*<td><code>(\w+)</code></td>", page(site, "reference/exit-codes")
    )
    assert rows == [("0", "OK"), ("1", "PROBLEMS"), ("2", "ERROR")]


def test_the_api_page_documents_every_checkpoint_method(site: Path) -> None:
    from ckpt_cli.api import methods

    markup = page(site, "reference/python-api")
    missing = []
    for name, call in methods().items():
        fn = call.function
        if (
            f'id="{fn.__module__}.{fn.__qualname__}"' not in markup
            or f"Checkpoint.{name}" not in markup
        ):
            missing.append(name)
    assert not missing, f"the generated API methods miss: {missing}"
    assert ":class:" not in text_of(markup)  # Sphinx roles read as code


def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "scripts" / "docs_hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_command_without_a_page_fails_the_build() -> None:
    from mkdocs.exceptions import PluginError

    module = hooks()
    module.on_config(None)
    module.on_page_markdown("<!-- ckpt:command versions -->", page=None)
    with pytest.raises(PluginError, match="no reference page for ckpt batches"):
        module.on_post_build(None)


def test_an_unknown_generated_part_fails_the_build() -> None:
    from mkdocs.exceptions import PluginError

    with pytest.raises(PluginError, match="unknown generated part"):
        hooks().on_page_markdown("<!-- ckpt:bogus -->", page=None)
    with pytest.raises(PluginError, match="no command 'bogus'"):
        hooks().on_page_markdown("<!-- ckpt:command bogus -->", page=None)
