"""Rerun the docs' console transcripts and write what ckpt printed back into the pages.

A transcript is a ```console block right after a ``<!-- transcript -->`` line. Each ``$ ``
line in it is run with bash; the lines after it, up to the next ``$ `` line, are replaced by
what the command printed (stdout and stderr, as a terminal of 80 columns shows them,
without colours). Commands run in a scratch directory, fresh for each page, that
``<!-- setup ... -->`` comments prepare (hidden from readers: copying and damaging a bundled
fixture); ``<!-- transcript repo -->`` runs them in the repository instead (read-only
commands on the fixtures). ``ckpt`` is this tree's, and ``$FIXTURES`` is
fixtures/checkpoints,
``$PYTHON`` the interpreter running this script.

    python scripts/docs_transcripts.py                  # README.md and every docs page
    python scripts/docs_transcripts.py docs/playbooks/wont-restart.md

Times in the output ("5d 9h ago") are the run's; rerun after a change to the CLI's output.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRATCH = Path(tempfile.gettempdir()) / "ckpt-docs"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
SETUP = re.compile(r"^<!-- setup\n(?P<script>.*?)\n-->$", re.S | re.M)
MARK = re.compile(r"^<!-- transcript(?P<repo> repo)? -->$")


def _env(bin_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(REPO),
        FIXTURES=str(REPO / "fixtures" / "checkpoints"),
        PYTHON=sys.executable,  # for setups: the interpreter with ckpt's (and the tests') packages
        COLUMNS="80",
        LINES="50",
        TTY_COMPATIBLE="1",  # tables and text as a terminal shows them
        TTY_INTERACTIVE="0",  # but no live progress bars
        TZ="UTC",
    )
    for name in ("FORCE_COLOR", "NO_COLOR", "CKPT_REQUIRE_SERVERS"):
        env.pop(name, None)
    return env


def _run(command: str, cwd: Path, env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    lines = [line.rstrip() for line in ANSI.sub("", done.stdout).splitlines()]
    while lines and not lines[0]:
        lines.pop(0)  # what a progress bar leaves on a terminal
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _setup(script: str, cwd: Path, env: dict[str, str]) -> None:
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env)
    if done.returncode:
        raise SystemExit(f"setup failed (exit {done.returncode}):\n{script}")


def refresh(page: Path, env: dict[str, str]) -> bool:
    """Rerun the page's transcripts; True when the page changed."""
    text = page.read_text()
    if "<!-- transcript" not in text:
        return False
    if SCRATCH.exists():
        shutil.rmtree(SCRATCH)
    SCRATCH.mkdir(parents=True)
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        setup = SETUP.match("\n".join(lines[i:])) if line == "<!-- setup" else None
        if setup:
            _setup(setup["script"], SCRATCH, env)
            count = setup["script"].count("\n") + 3
            out.extend(lines[i : i + count])
            i += count
            continue
        mark = MARK.match(line)
        if not (mark and i + 1 < len(lines) and lines[i + 1].startswith("```console")):
            out.append(line)
            i += 1
            continue
        cwd = REPO if mark["repo"] else SCRATCH
        out.extend(lines[i : i + 2])
        i += 2
        while i < len(lines) and not lines[i].startswith("```"):
            if lines[i].startswith("$ "):
                out.append(lines[i])
                out.extend(_run(lines[i][2:], cwd, env))
            i += 1
    page.write_text("\n".join(out))
    return "\n".join(out) != text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", type=Path)
    args = parser.parse_args()
    pages = args.pages or [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    with tempfile.TemporaryDirectory() as tmp:
        bin_dir = Path(tmp)
        ckpt = bin_dir / "ckpt"
        ckpt.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ckpt_cli "$@"\n')
        ckpt.chmod(0o755)
        env = _env(bin_dir)
        for page in pages:
            if refresh(page.resolve(), env):
                print(f"updated {page}")
    shutil.rmtree(SCRATCH, ignore_errors=True)


if __name__ == "__main__":
    main()
