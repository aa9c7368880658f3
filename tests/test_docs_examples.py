"""The documentation's Python examples run as written, on the bundled fixtures; where a
``text`` block follows an example, it is what the example prints."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from tests.conftest import REPO

PAGES = [REPO / "docs" / "reference" / "python-api.md", REPO / "docs" / "playbooks" / "notebook.md"]
BLOCK = re.compile(r"```python\n(?P<code>.*?)```(?:\s*```text\n(?P<output>.*?)```)?", re.S)


def examples() -> list[tuple[str, str, str | None]]:
    found = []
    for path in PAGES:
        for number, match in enumerate(BLOCK.finditer(path.read_text())):
            found.append((f"{path.name}#{number}", match["code"], match["output"]))
    return found


def test_the_pages_have_examples() -> None:
    assert len(examples()) >= 6


@pytest.mark.parametrize(("name", "code", "output"), examples(), ids=[e[0] for e in examples()])
def test_example_runs(
    name: str, code: str, output: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # the examples name the fixtures by their path in the repository
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, name, "exec"), {})
    assert printed.getvalue().strip(), "an example that prints nothing shows nothing"
    if output is not None:
        assert printed.getvalue().rstrip() == output.rstrip()
