"""The README's Python examples ("The library") run as written, on the bundled fixture."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def library_examples() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("\n## The library\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_readme_has_library_examples() -> None:
    assert len(library_examples()) >= 3


@pytest.mark.parametrize("index", range(len(library_examples())))
def test_readme_library_example_runs(index: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # the examples name the fixture by its path in the repository
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(library_examples()[index], f"README example {index}", "exec"), {})
    assert out.getvalue().strip(), "an example that prints nothing shows nothing"
