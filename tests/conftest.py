"""Shared test helpers: the bundled fixture cases and a CLI runner."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ckpt_cli.cli import app
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.state.reader import covering_reads
from tests.servers import azure_server, s3_server, store

# One moto server and one Azurite for the whole session, whichever modules use them.
__all__ = ["azure_server", "s3_server", "store"]

REPO = Path(__file__).resolve().parent.parent
CASES_DIR = REPO / "fixtures" / "checkpoints"


@dataclass(frozen=True)
class Case:
    """A bundled fixture: a checkpoint written by real Spark, and what Spark said about it."""

    name: str
    root: Path

    @property
    def checkpoint(self) -> Path:
        return self.root / "checkpoint"

    @property
    def expected(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.root / "expected.json").read_text())
        return data


def discover_cases() -> list[Case]:
    if not CASES_DIR.is_dir():
        return []
    return [
        Case(p.name, p)
        for p in sorted(CASES_DIR.iterdir())
        if (p / "expected.json").is_file() and (p / "checkpoint").is_dir()
    ]


CASES = discover_cases()


def fixture_case(name: str) -> Case:
    """The bundled fixture ``name`` (which must be there)."""
    root = CASES_DIR / name
    assert (root / "checkpoint").is_dir(), f"no fixture {name}"
    return Case(name, root)


# Cases whose query Spark itself cannot restart, and the validate finding that says why
# (fixtures/README.md: Spark 4.3 rejects its own flatMapGroupsWithState state format 1
# snapshots). Every other case is healthy.
CANNOT_RESTART = {"spark4-fmgws-v1-hdfs": "FMGWS_V1_SNAPSHOT"}
# Cases their own Spark restarts and a newer one does not, and the validate warning that
# says so: a restart of spark40-rocksdb-v2 loads Spark 4.0's v2 zip metadata, with changelogs
# only from version 4, so Spark 4.1+ fail on it (tests/test_v2_upgrade.py).
UPGRADE_WARNING = {"spark40-rocksdb-v2": "ZIP_METADATA_V2"}
# Cases whose rows --deep finds written under another schema than they are read with, and
# the warning: spark4-tws-evolve-nocheck changed a state variable's schema with
# stateSchemaCheck=false, and Spark kept the old schema file (tests/test_state_history.py).
DEEP_WARNING = {"spark4-tws-evolve-nocheck": "ROW_LAYOUT_MISMATCH"}
# transformWithState cases: their operator metadata v2 names the home the generator ran in,
# which is gone, so Spark 4.3 fails to restart them where they are (tests/
# test_relocate_spark.py), and validate says so. ``ckpt relocate`` makes a copy that
# restarts; the tests that need one place the copy at its recorded home instead.
ELSEWHERE = "SCHEMA_PATHS_ELSEWHERE"
NAMES_ITS_HOME = {
    c.name
    for c in CASES
    if any(
        "transformWithState" in p.read_text(errors="replace")
        for p in c.checkpoint.glob("state/*/_metadata/v2/[0-9]*")
    )
}


def errors_but_home(validation: dict[str, Any]) -> list[str]:
    """The error codes of a validation (JSON) other than a copy's ``ELSEWHERE``."""
    return [
        f["code"]
        for f in validation["findings"]
        if f["severity"] == "error" and f["code"] != ELSEWHERE
    ]


def known_findings(case: Case, *, deep: bool = False) -> set[str]:
    """The warnings and errors validate finds on a bundled case (none on a healthy one)."""
    found = set()
    for known in (CANNOT_RESTART, UPGRADE_WARNING, DEEP_WARNING if deep else {}):
        if case.name in known:
            found.add(known[case.name])
    if case.name in NAMES_ITS_HOME:
        found.add(ELSEWHERE)
    return found


def replay_args(ckpt: Checkpoint, operator: int, store: str) -> list[list[str]]:
    """``ckpt replay`` options that together read a store: one per state variable, the
    timers, or each join family where it holds several column families (as Spark must be
    asked, ``covering_reads``)."""
    out = []
    for read in covering_reads(ckpt, operator):
        args = ["--operator", str(operator), "--store", read.get("store", store)]
        if "state_var" in read:
            args += ["--state-var", read["state_var"]]
        if read.get("timers"):
            args.append("--timers")
        out.append(args)
    return out


def case_params() -> list[Any]:
    return [pytest.param(c, id=c.name) for c in CASES]


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def run_cli(*args: str) -> CliResult:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return CliResult(result.exit_code, result.stdout, result.stderr)


@pytest.fixture
def cli() -> Iterator[Any]:
    yield run_cli
