"""``ckpt report``: one self-contained HTML page (no network needed to view it) with the
headline, the validate findings and plots of the state's size per partition over versions,
the batch timeline and the bytes by file class.

The plots are plotly figures, with plotly.js inlined once in the page. Everything comes from
what the other commands compute: the listing (no state file is decoded for the plots),
:func:`~ckpt_cli.batches.batch_timeline`, :func:`~ckpt_cli.du.disk_usage`,
:func:`~ckpt_cli.validate.headline.headline` and :func:`~ckpt_cli.validate.validate` (its default
scope: the versions a restart loads).
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from ckpt_cli.batches import BatchesReport, batch_timeline
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.du import DiskUsageReport, disk_usage
from ckpt_cli.install import missing_extra
from ckpt_cli.results import Report, fields_json
from ckpt_cli.storage import Storage
from ckpt_cli.validate import ValidationReport, validate
from ckpt_cli.validate.headline import Headline, headline

if TYPE_CHECKING:
    from collections.abc import Mapping

# The element ids of the plots (the browser test looks for them).
PLOT_IDS = ("state-heatmap", "batch-timeline", "bytes-by-class")


@dataclass(frozen=True)
class StateSizes:
    """Bytes of the state files (delta, snapshot, changelog, zip) each partition wrote for
    each version: rows are ``<operator>/<store>/<partition>``, columns versions."""

    rows: list[str]
    versions: list[int]
    bytes: list[list[int | None]]  # None: no file of that version in that partition


@dataclass(frozen=True)
class HtmlReport(Report):
    """What ``ckpt report`` wrote (exit 0 once the page is written; its findings are in it)."""

    checkpoint: str
    output: str
    size: int
    headline: Headline
    validation_status: str
    findings: int
    batches: int
    partitions: int
    versions: int

    def body_json(self) -> dict[str, Any]:
        return fields_json(
            self,
            "checkpoint output bytes=size headline validation batches"
            " state_partitions=partitions state_versions=versions",
            validation={"status": self.validation_status, "findings": self.findings},
        )


def state_sizes(checkpoint: Checkpoint) -> StateSizes:
    """From the listing alone: what each partition wrote for each version."""
    rows: list[str] = []
    cells: list[dict[int, int]] = []
    for op in checkpoint.operators.values():
        for store in op.stores.values():
            for part in store.partitions.values():
                rows.append(f"{op.id}/{store.name}/{part.id}")
                cells.append(
                    {v: sum(f.entry.size for f in sv.files) for v, sv in part.versions.items()}
                )
    versions = sorted({v for row in cells for v in row})
    return StateSizes(rows, versions, [[row.get(v) for v in versions] for row in cells])


def write_report(
    checkpoint: Checkpoint,
    output: str,
    *,
    storage_options: Mapping[str, Any] | None = None,
    now_ms: int | None = None,
) -> HtmlReport:
    """Write the HTML report of ``checkpoint`` to ``output`` (a local path or a URL)."""
    require_plotly()
    view = checkpoint.tolerant_view()
    findings = validate(view)
    head = headline(checkpoint, report=findings)  # one verdict: the findings shown below
    timeline = batch_timeline(view, now_ms=now_ms)
    usage = disk_usage(view)
    sizes = state_sizes(view)
    page = render_html(checkpoint.storage.url, head, timeline, usage, findings, sizes)
    data = page.encode("utf-8")
    if "://" in output:
        parent, _, name = output.rpartition("/")
    else:
        parent, name = os.path.split(os.path.abspath(output))
    Storage.from_url(parent, storage_options).write_bytes(name, data, atomic=True)
    return HtmlReport(
        checkpoint=checkpoint.storage.url,
        output=output,
        size=len(data),
        headline=head,
        validation_status=findings.status,
        findings=len(findings.findings),
        batches=len(timeline.batches),
        partitions=len(sizes.rows),
        versions=len(sizes.versions),
    )


# -- the page ---------------------------------------------------------------------------------


def require_plotly() -> None:
    """MissingExtraError unless plotly (the ``report`` extra) imports: checked before the
    checkpoint is listed and read."""
    _plotly()


def _plotly() -> Any:
    """plotly's modules the page is made with (``go``; ``get_plotlyjs``, ``make_subplots``)."""
    try:
        import plotly.graph_objects as go
        from plotly.offline import get_plotlyjs
        from plotly.subplots import make_subplots
    except ImportError as exc:
        raise missing_extra("ckpt report", "report", exc) from exc
    return SimpleNamespace(go=go, get_plotlyjs=get_plotlyjs, make_subplots=make_subplots)


def render_html(
    url: str,
    head: Headline,
    timeline: BatchesReport,
    usage: DiskUsageReport,
    findings: ValidationReport,
    sizes: StateSizes,
) -> str:
    """The page: plotly.js once in the head, then each section."""
    plotly = _plotly()
    figures = {
        "state-heatmap": _heatmap(plotly.go, sizes),
        "batch-timeline": _timeline(plotly, timeline),
        "bytes-by-class": _by_class(plotly, usage),
    }
    plots = {
        div: fig.to_html(full_html=False, include_plotlyjs=False, div_id=div)
        for div, fig in figures.items()
    }
    title = f"ckpt report: {url}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{html.escape(title)}</title>
<style>{_CSS}</style>
<script>{plotly.get_plotlyjs()}</script>
</head><body>
<h1>{html.escape(title)}</h1>
{_headline_html(head)}
<h2>Validate ({html.escape(findings.status)})</h2>
{_findings_html(findings)}
<h2>State written per partition and version</h2>
<p>Bytes of the delta, snapshot, changelog and zip files of each version, from the listing
(no state file is read). Rows are operator/store/partition: a bright row is a hot partition
(keys are hash-partitioned), a brightening column growth.</p>
{plots["state-heatmap"]}
<h2>Batches</h2>
<p>{_batch_summary(timeline)}</p>
{"" if has_watermark(timeline) else _NO_WATERMARK}
{plots["batch-timeline"]}
<h2>Files and bytes by class</h2>
<p>{usage.total.files:,} files, {usage.total.bytes:,} bytes.</p>
{plots["bytes-by-class"]}
</body></html>
"""


_NO_WATERMARK = (
    "<p>No watermark chart: the query sets no watermark (no withWatermark), every batch's is 0.</p>"
)

_CSS = (
    "body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1200px}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em;"
    "text-align:left;vertical-align:top}.error{color:#b00}.warning{color:#a60}"
    ".ok{color:#070}.paths{font-family:monospace;font-size:90%}"
)


def _headline_html(head: Headline) -> str:
    restart = (
        '<span class="ok">yes</span>'
        if head.restartable
        else f'<span class="warning">not known</span>: {html.escape(head.unchecked)}'
        if head.restartable is None
        else f'<span class="error">no</span>, because {html.escape("; ".join(head.because))}'
    )
    rows = {"Last activity": head.last_activity or "unknown"}
    if head.files_apart and head.files_modified:  # a copy or restore: as `ckpt versions` says
        rows["Files modified"] = head.files_modified
    rows |= {
        "Watermark": head.watermark or "none",
        "Last committed batch": (
            "none" if head.latest_committed is None else f"{head.latest_committed:,}"
        ),
    }
    cells = "".join(f"<tr><th>{k}</th><td>{html.escape(v)}</td></tr>" for k, v in rows.items())
    return f"<table>{cells}<tr><th>Restartable</th><td>{restart}</td></tr></table>"


def _findings_html(report: ValidationReport) -> str:
    if not report.findings:
        return '<p class="ok">No findings.</p>'
    rows = "".join(
        f'<tr><td class="{html.escape(f.severity)}">{html.escape(f.severity)}</td>'
        f"<td>{html.escape(f.code)}</td><td>{html.escape(f.message)}</td>"
        f"<td>{html.escape(f.hint or '')}</td>"
        f'<td class="paths">{_paths_html(f.paths[:3])}</td></tr>'
        for f in report.findings
    )
    return (
        "<table><tr><th>Severity</th><th>Code</th><th>Finding</th><th>What to do</th>"
        f"<th>Paths</th></tr>{rows}</table>"
    )


def _paths_html(paths: list[str]) -> str:
    """Paths that wrap after a '/' only (never inside a file name)."""
    return ", ".join(html.escape(p).replace("/", "/<wbr>") for p in paths)


def _batch_summary(timeline: BatchesReport) -> str:
    parts = [f"{len(timeline.batches):,} batches"]
    if timeline.latest_committed is not None:
        parts.append(f"last committed {timeline.latest_committed:,}")
    if timeline.in_flight:
        parts.append("in flight: " + ", ".join(f"{b:,}" for b in timeline.in_flight))
    gaps = timeline.offsets_gaps + timeline.commits_gaps
    if gaps:
        parts.append("gaps: " + ", ".join(f"{b:,}" for b in sorted(set(gaps))))
    return html.escape("; ".join(parts))


def _heatmap(go: Any, sizes: StateSizes) -> Any:
    fig = go.Figure(
        go.Heatmap(
            z=sizes.bytes,
            x=[str(v) for v in sizes.versions],
            y=sizes.rows,
            colorscale="Viridis",
            colorbar={"title": "bytes"},
            hovertemplate="partition %{y}<br>version %{x}<br>%{z:,} bytes<extra></extra>",
        )
    )
    height = max(320, min(1200, 120 + 14 * len(sizes.rows)))
    fig.update_layout(height=height, xaxis_title="version", yaxis_title="operator/store/partition")
    fig.update_yaxes(type="category", autorange="reversed")
    fig.update_xaxes(type="category")
    return fig


_STATE_COLOURS = {
    "committed": "#2a7",
    "in-flight": "#e90",
    "not-committed": "#c33",
    "offsets-missing": "#888",
}


def has_watermark(timeline: BatchesReport) -> bool:
    return any(r.watermark_ms for r in timeline.batches)


def _timeline(plotly: Any, timeline: BatchesReport) -> Any:
    """Planned times above, the watermark below (event time can be far from wall time); a
    query with no watermark (none set, or 0 in every batch) gets no empty chart for it."""
    go = plotly.go
    watermark = has_watermark(timeline)
    fig = plotly.make_subplots(
        rows=2 if watermark else 1,
        cols=1,
        shared_xaxes=True,
        subplot_titles=("planned", "watermark") if watermark else ("planned",),
    )
    # (rows, y of a row, subplot row, trace name, mode, style)
    series = [
        (
            [r for r in timeline.batches if r.state == state and r.planned],
            "planned",
            1,
            state,
            "markers",
            {"marker": {"color": colour, "size": 8}},
        )
        for state, colour in _STATE_COLOURS.items()
    ]
    if watermark:
        series.append(
            (
                [r for r in timeline.batches if r.watermark_ms],
                "watermark",
                2,
                "watermark",
                "lines+markers",
                {"line": {"color": "#36c", "shape": "hv"}},
            )
        )
    for rows, field, row, name, mode, style in series:
        if rows:
            xs, ys = [r.batch for r in rows], [getattr(r, field) for r in rows]
            fig.add_trace(go.Scatter(x=xs, y=ys, mode=mode, name=name, **style), row, 1)
    for batch in sorted(set(timeline.offsets_gaps)):
        fig.add_vline(x=batch, line={"color": "#888", "dash": "dot"})
    fig.update_layout(height=460 if watermark else 300)
    fig.update_xaxes(tickformat="d")
    fig.update_xaxes(title_text="batch", row=2 if watermark else 1, col=1)
    return fig


def _by_class(plotly: Any, usage: DiskUsageReport) -> Any:
    go = plotly.go
    names = list(usage.by_class)
    fig = plotly.make_subplots(rows=1, cols=2, subplot_titles=("bytes", "files"))
    fig.add_trace(go.Bar(x=names, y=[u.bytes for u in usage.by_class.values()], name="bytes"), 1, 1)
    fig.add_trace(go.Bar(x=names, y=[u.files for u in usage.by_class.values()], name="files"), 1, 2)
    fig.update_layout(height=360, showlegend=False)
    return fig
