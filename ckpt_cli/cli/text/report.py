"""``ckpt report``: where the page went and what it says, in two lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from ckpt_cli.api import HtmlReport
from ckpt_cli.cli.text import render_text
from ckpt_cli.cli.text.fit import Flow
from ckpt_cli.units import human_bytes

if TYPE_CHECKING:
    from ckpt_cli.cli.output import TextRenderer


@render_text.register(HtmlReport)
def _report(report: HtmlReport, out: TextRenderer) -> None:
    r = report.headline.restartable
    restart = "yes" if r else "not known" if r is None else "no"
    out.console.print(
        Flow(
            Text.assemble(
                "Wrote ",
                (report.output, "bold"),
                f" ({human_bytes(report.size)}): {report.batches:,} batches, "
                f"{report.partitions:,} state partitions over {report.versions:,} versions, "
                f"{report.findings:,} validate findings ({report.validation_status}); "
                f"restartable: {restart}.",
            )
        )
    )
