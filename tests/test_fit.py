"""Output that fits a terminal (issue 33): every command's text on the fixtures at 80 and 120
columns has no line wider than the terminal and no path broken inside a segment (unless the
segment alone is wider); help is reflowed at the width; alike partitions share a row in
`versions`; partition numbers sort as numbers; one table-or-TSV rule in a pipe; --json
indented on a terminal and one line in a pipe."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console
from typer.testing import CliRunner

from ckpt_cli.cli import app
from ckpt_cli.cli.text.fit import Flow
from ckpt_cli.cli.text.versions import partition_rows
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.units import human_bytes, natural_key
from ckpt_cli.versions import describe_versions
from tests.conftest import CASES_DIR, REPO, CliResult, replay_args
from tests.fixture_copies import remove_restart_sst

WIDTHS = (80, 120)
COMMANDS = sorted(c.name or "" for c in app.registered_commands)
HDFS_200 = CASES_DIR / "spark4-hdfs-agg-200" / "checkpoint"
ROCKS_200 = CASES_DIR / "spark4-rocksdb-agg-200" / "checkpoint"


def run_at(width: int, *args: str) -> CliResult:
    """The CLI as in a terminal ``width`` columns wide (Rich reads COLUMNS)."""
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(width)})
    return CliResult(result.exit_code, result.stdout, result.stderr)


# -- every command's text ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Fixtures with many partitions, long file names (UUIDs) and damage to show."""
    base = tmp_path_factory.mktemp("fit")
    found = {"hdfs-200": HDFS_200, "join": CASES_DIR / "spark4-join" / "checkpoint"}
    # transformWithState whose state changed between restarts: versions' state history.
    found["tws-evolve"] = CASES_DIR / "spark4-tws-evolve-avro" / "checkpoint"
    crashed = base / "crash-v2"  # temp files of interrupted writes: very long names
    shutil.copytree(CASES_DIR / "spark4-crash-rocksdb-v2" / "checkpoint", crashed)
    found["crash-v2"] = crashed
    rocks = base / "rocks-200-damaged"  # a restart zip's SST missing: errors, a repair plan
    shutil.copytree(ROCKS_200, rocks)
    remove_restart_sst(rocks, 169)
    found["rocks-200-damaged"] = rocks
    hdfs = base / "hdfs-200-damaged"
    shutil.copytree(HDFS_200, hdfs)
    for partition in (2, 10, 100):  # errors in partitions whose order string-sorting breaks
        snapshot = hdfs / f"state/0/{partition}/6.snapshot"  # what a restart loads
        snapshot.write_bytes(snapshot.read_bytes()[:-10])
        (snapshot.parent / ".6.snapshot.crc").unlink(missing_ok=True)
    found["hdfs-200-damaged"] = hdfs
    return found


def command_lines(name: str, root: Path, tmp: Path) -> list[tuple[str, ...]]:
    """Each command, with the options that show its tables, on checkpoint ``root``."""
    model = Checkpoint.open(str(root))
    op = next(iter(model.operators.values()))
    store = next(iter(op.stores))
    suffixes = (".delta", ".snapshot", ".zip", ".changelog")
    state = sorted(p for p in (root / "state/0/0").rglob("*") if p.name.endswith(suffixes))
    return [
        ("versions", str(root)),
        ("versions", str(root), "--all"),
        ("batches", str(root)),
        ("du", str(root)),
        ("validate", str(root)),
        ("validate", str(root), "--all-versions"),
        ("orphans", str(root), "--files"),
        ("cleanup", str(root), "--files"),
        ("repair", str(root)),
        ("repartition", str(root), "--partitions", "3"),
        ("convert", str(root), "--provider", "rocksdb"),
        ("convert", str(root), "--provider", "hdfs"),
        ("convert", str(root), "--format-version", "2"),
        ("relocate", str(root), str(tmp / f"{name}-relocated")),
        ("state", "delete", str(root), "--operator", str(op.id), "--keys", _one_key(root, tmp)),
        ("replay", str(root), *replay_args(model, op.id, store)[0], "--limit", "5"),
        ("inspect", str(state[-1])),
        ("report", str(root), "-o", str(tmp / f"{name}.html")),
    ]


def _one_key(root: Path, tmp: Path) -> str:
    """A keys file naming the first key ``replay`` gives of operator 0 (empty when it gives
    none, or refuses: a store ``state delete`` refuses too)."""
    first = CliRunner().invoke(app, ["replay", str(root), "--limit", "1", "--format", "jsonl"])
    path = tmp / f"{root.name}-keys.jsonl"
    path.write_text(first.stdout if first.exit_code == 0 else "")
    return str(path)


_PATH = re.compile(r"[\w.=-]+(?:/[\w.=-]+)+")


def paths_in(value: Any) -> Iterator[str]:
    """Every path-like word in a JSON document's strings."""
    if isinstance(value, str):
        yield from _PATH.findall(value)
    elif isinstance(value, dict):
        for v in value.values():
            yield from paths_in(v)
    elif isinstance(value, list):
        for v in value:
            yield from paths_in(v)


def assert_fits(text: str, width: int, paths: set[str], what: str) -> None:
    lines = text.splitlines()
    for line in lines:
        assert cell_len(line) <= width, f"{what}: wider than {width}:\n{line}"
        assert "\t" not in line, f"{what}: a tab in a table"
    # A segment shown in part must be whole on one line, unless it alone is wider than a line
    # (less an item's indent). Shown in part: any run of half its characters (at least 8) is
    # there; a segment cut anywhere leaves one such run on one side of the cut.
    for segment in {s for p in paths for s in p.split("/") if 8 <= len(s) <= width - 4}:
        run = max(8, (len(segment) + 1) // 2)
        shown = any(segment[i : i + run] in text for i in range(len(segment) - run + 1))
        if shown:
            assert any(segment in line for line in lines), (
                f"{what}: {segment!r} broken at {width} columns:\n{text}"
            )


@pytest.mark.parametrize(
    "name",
    ["hdfs-200", "join", "crash-v2", "rocks-200-damaged", "hdfs-200-damaged", "tws-evolve"],
)
def test_every_command_fits_80_and_120_columns(
    name: str, checkpoints: dict[str, Path], tmp_path: Path
) -> None:
    root = checkpoints[name]
    for args in command_lines(name, root, tmp_path):
        doc = CliRunner().invoke(app, [*args, "--json"])
        paths = set(paths_in(json.loads(doc.stdout))) if doc.stdout.strip() else set()
        for width in WIDTHS:
            result = run_at(width, *args)
            if result.exit_code == 2:  # refused (repartition of a damaged checkpoint)
                assert result.stderr.startswith("error: ") and not result.stdout, args
                continue
            assert result.exit_code in (0, 1), (args, result.stderr)
            assert result.stdout.strip(), args
            # stdout; stderr's errors, warnings and notes are one line each, by design.
            assert_fits(result.stdout, width, paths, " ".join(args[:1]))


def test_a_long_path_folds_after_a_slash_only() -> None:
    console = Console(width=40)
    path = "state/0/1/.8_003e9d55-75e0-46f6-9fff-af918dbb4843.zip.crc"
    with console.capture() as captured:
        console.print(Flow.plain(f"checksum of {path}, which is not there", indent=2))
    assert captured.get().splitlines() == [
        "checksum of state/0/1/",
        # The segment (48 characters) is wider than a line: only then is it cut.
        "  .8_003e9d55-75e0-46f6-9fff-af918dbb484",
        "  3.zip.crc, which is not there",
    ]
    short = "state/0/1/8_003e9d55-75e0.zip"
    with console.capture() as captured:
        console.print(Flow.plain(f"a few words before the path {short} after"))
    assert captured.get().splitlines() == ["a few words before the path", f"{short} after"]


# -- help -------------------------------------------------------------------------------------


def description(text: str) -> list[list[str]]:
    """The paragraphs of a help's description (before its first panel), unindented ones."""
    top = text.split("╭")[0]
    paragraphs: list[list[str]] = []
    for block in re.split(r"\n\s*\n", top):
        lines = [line.rstrip() for line in block.splitlines() if line.strip()]
        if lines and not lines[0].startswith("   ") and "Usage:" not in lines[0]:
            paragraphs.append(lines)
    return paragraphs


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_is_reflowed_at_the_width(command: str) -> None:
    for width in WIDTHS:
        result = run_at(width, *([command] if command else []), "--help")
        assert result.exit_code == 0
        text = result.stdout
        assert_fits(text, width, set(), f"{command} --help")
        for bad in ("<bool>", "<str>", "<int>", "<list"):
            assert bad not in text, f"{command} --help shows {bad}"
        # Filled like a paragraph: no line ends where the next line's first word would fit
        # (a docstring wrapped in the source, rewrapped, left such fragments).
        for paragraph in description(text):
            for line, following in zip(paragraph, paragraph[1:], strict=False):
                first = following.split()[0]
                assert len(line.strip()) + 1 + len(first) > width - 2, (
                    f"{command} --help at {width}: a fragment:\n{line}\n{following}"
                )


def test_help_keeps_bracketed_text_and_names_option_values() -> None:
    report = run_at(100, "report", "--help").stdout
    assert "spark-ckpt[report]" in report  # Rich markup used to eat "[report]"
    replay = run_at(100, "replay", "--help").stdout
    assert "--output, -o FILE" in replay and "--output-dir, -O DIR" in replay
    assert "--state-version V" in replay and "--partition, -p N" in replay
    repartition = run_at(100, "repartition", "--help").stdout
    assert "--partitions M" in repartition and not re.search(r"(?<![\w-])-p\b", repartition)
    root = run_at(100, "--help").stdout
    assert "--json" in root and "--tsv" in root and "pipe" in root  # the one output rule


# -- versions: alike partitions share a row ---------------------------------------------------


def test_versions_groups_alike_partitions_and_all_lists_each() -> None:
    text = run_at(80, "versions", str(HDFS_200)).stdout
    table = text.split("store default")[1]
    rows = [line for line in table.splitlines() if re.match(r"^\S", line)][2:]
    assert len(rows) < 10, text
    assert any(line.startswith("1-199 ") for line in rows), text
    assert "200 partitions in" in text and "--all" in text
    every = run_at(80, "versions", str(HDFS_200), "--all").stdout
    numbers = [
        int(line.split()[0]) for line in every.splitlines() if re.match(r"^\s+\d+\s+\d", line)
    ]
    assert numbers == list(range(200))
    doc = json.loads(run_at(80, "versions", str(HDFS_200), "--json").stdout)
    assert len(doc["operators"][0]["stores"][0]["partitions"]) == 200


def test_a_hot_partition_stands_out_of_its_group() -> None:
    report = describe_versions(Checkpoint.open(str(HDFS_200)))
    parts = list(report.operators[0].stores[0].partitions)
    parts[57] = replace(parts[57], bytes=parts[57].bytes * 10)
    rows = {r[0]: r for r in partition_rows(parts, every=False)}
    assert set(rows) == {"0", "1-56, 58-199", "57"}, rows
    assert rows["57"][5] == human_bytes(parts[57].bytes)  # on a row of its own
    assert len(partition_rows(parts[:10], every=False)) == 10  # few partitions: a row each


# -- natural order of partitions --------------------------------------------------------------


def test_natural_key() -> None:
    names = ["state/0/100", "state/0/10", "state/0/9", "state/0/1", "state/1/0", "state/0/2"]
    assert sorted(names, key=natural_key) == [
        "state/0/1",
        "state/0/2",
        "state/0/9",
        "state/0/10",
        "state/0/100",
        "state/1/0",
    ]


def test_partitions_sort_as_numbers(checkpoints: dict[str, Path]) -> None:
    root = checkpoints["hdfs-200-damaged"]
    doc = json.loads(run_at(120, "validate", str(root), "--json").stdout)
    errors = [f["paths"][0] for f in doc["findings"] if f["severity"] == "error" and f["paths"]]
    assert errors == sorted(errors, key=natural_key) and len(errors) >= 3
    text = run_at(120, "validate", str(root)).stdout
    order = [text.index(f"state/0/{p}/6.snapshot") for p in (2, 10, 100)]
    assert order == sorted(order)
    plan = json.loads(
        run_at(120, "repartition", str(HDFS_200), "--partitions", "3", "--json").stdout
    )
    left = [d for s in plan["stores"] for d in s.get("left_over", [])] or plan.get("left_over", [])
    assert left[:3] == ["state/0/3", "state/0/4", "state/0/5"] and left == sorted(
        left, key=natural_key
    )


# -- one rule in a pipe, and --json ----------------------------------------------------------


@pytest.mark.parametrize("command", ["versions", "batches", "du", "validate", "orphans"])
def test_tables_in_a_pipe_and_json_one_line(command: str) -> None:
    # CliRunner's stdout is not a terminal: the same tables as on one, never bare TSV.
    text = run_at(120, command, str(HDFS_200))
    assert "\t" not in text.stdout
    if command in ("versions", "batches", "du"):
        assert "━" in text.stdout
    doc = run_at(120, command, str(HDFS_200), "--json")
    assert doc.stdout.count("\n") == 1 and json.loads(doc.stdout)  # compact: one line


def _on_a_terminal(*args: str) -> str:
    """stdout of ``ckpt args`` run with a pseudo-terminal as its stdout."""
    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "100"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ckpt_cli", *args],
        stdout=follower,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=REPO,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_json_is_indented_on_a_terminal() -> None:
    out = _on_a_terminal("du", str(HDFS_200), "--summarize", "--json")
    assert out.startswith("{\n  ") and json.loads(out) == json.loads(
        run_at(100, "du", str(HDFS_200), "--summarize", "--json").stdout
    )
