"""``ckpt validate``."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from ckpt_cli.api import ValidationReport, validate
from ckpt_cli.cli.common import (
    EngineOpt,
    MasterOpt,
    PathArg,
    SharedOptions,
    error_boundary,
    start,
    workers_option,
)
from ckpt_cli.cli.output import render
from ckpt_cli.engine import make_engine


class FailOn(str, Enum):
    error = "error"
    warning = "warning"


@error_boundary
def validate_command(
    path: PathArg,
    batch: Annotated[
        int | None,
        typer.Option(
            "--batch",
            metavar="N",
            help="Check what restarting from this committed batch needs (default: the latest).",
            show_default=False,
        ),
    ] = None,
    all_versions: Annotated[
        bool,
        typer.Option(
            "--all-versions", help="Check that every retained state version can be loaded."
        ),
    ] = False,
    deep: Annotated[
        bool,
        typer.Option(
            "--deep",
            help="Decode every state file end to end and verify every checksum sidecar.",
        ),
    ] = False,
    fail_on: Annotated[
        FailOn,
        typer.Option(
            "--fail-on",
            metavar="SEVERITY",
            help="Exit 1 when a finding of this severity or worse.",
        ),
    ] = FailOn.error,
    junit: Annotated[
        Path | None,
        typer.Option(
            "--junit",
            metavar="FILE",
            help="Also write a JUnit XML report here.",
            show_default=False,
        ),
    ] = None,
    workers: Annotated[int | None, workers_option("Parallel reads (default: 4 per core).")] = None,
    engine: EngineOpt = "local",
    master: MasterOpt = None,
    shared: SharedOptions = SharedOptions(),
) -> ValidationReport:
    """Check that the query can restart from this checkpoint, and say why not.

    By default checks what Spark needs to restart from the latest committed batch (and to
    re-run a batch in flight): the metadata file, the latest offsets and commit entries, and
    for every state store partition the files that load version latest+1 (snapshot and
    deltas, zip and changelogs, the format-v2 lineage), decoded end to end with their
    checksum sidecars. Every finding has a code, a severity (error / warning / info), the
    paths, and a hint.

    Exit code 0 when nothing at or above --fail-on is found, 1 when something is, 2 when
    validation could not run.

    Examples:

      ckpt validate /data/ckpt/q1

      ckpt validate s3://bucket/ckpt/q1 --deep --json

      ckpt validate /data/ckpt/q1 --all-versions --junit validate.xml
    """
    run = start(shared)
    report = validate(
        run.open(path),
        batch=batch,
        all_versions=all_versions,
        deep=deep,
        progress=run.progress,
        # --workers sizes the local engine, which makes the reads.
        engine=make_engine(engine, workers=workers, master=master),
        fail_on=fail_on.value,
    )
    if junit is not None:
        render(report, "junit", target=junit)
    return run.render(report)
