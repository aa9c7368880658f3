"""``ckpt report``."""

from __future__ import annotations

from typing import Annotated

from ckpt_cli.api import HtmlReport, require_plotly, write_report
from ckpt_cli.cli.common import (
    PathArg,
    SharedOptions,
    check_output_file,
    error_boundary,
    output_option,
    start,
)


@error_boundary
def report(
    path: PathArg,
    output: Annotated[
        str, output_option("Where to write the HTML page: a local path or a URL.")
    ] = "report.html",
    shared: SharedOptions = SharedOptions(),
) -> HtmlReport:
    """One self-contained HTML page (it opens offline): the headline, the
    validate findings, a heatmap of the state written per partition and version
    (skew and growth), the batch timeline (planned times, watermark, gaps,
    in-flight batches) and the files and bytes by class.

    No state file is decoded for the plots; validate runs in its default scope.
    Needs plotly: pip install 'spark-ckpt[report]'.

    Examples:

      ckpt report /data/ckpt/q1 -o q1.html

      ckpt report s3://bucket/ckpt/q1 -o s3://bucket/reports/q1.html
    """
    run = start(shared)
    check_output_file(output)
    require_plotly()  # before the checkpoint is listed
    return run.render(write_report(run.open(path), output, storage_options=run.storage_options))
