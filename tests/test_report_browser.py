"""``ckpt report`` in a real browser: headless Chromium (Debian's ``chromium`` package, which
``scripts/bootstrap`` installs) loads the page from disk with the network off, logs nothing to
its console, and draws every plot at a non-zero size. The screenshot is kept as the test's
output (its path is printed; ``pytest -s`` shows it)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from ckpt_cli.report import PLOT_IDS
from tests.conftest import CASES_DIR, run_cli
from tests.servers import unavailable

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# No network and nothing Chromium does on its own; the page must not need any of it.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--proxy-server=127.0.0.1:9",  # any fetch fails, and would log to the console
    "--enable-logging=stderr",
    "--v=0",
    "--virtual-time-budget=10000",  # run the page's scripts to completion
    "--window-size=1280,2400",
]


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:  # skipped, or failed in CI (CKPT_REQUIRE_SERVERS=1)
        unavailable("needs chromium (scripts/bootstrap installs it)")
    assert CHROMIUM is not None
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def test_report_renders_in_chromium_without_console_messages(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    ckpt = CASES_DIR / "spark4-join" / "checkpoint"
    assert run_cli("report", str(ckpt), "-o", str(page)).exit_code == 0
    loaded = _chromium(tmp_path, "--dump-dom", page.as_uri())
    # Chromium logs every console message (log, warning, error, uncaught exception) as CONSOLE.
    console = [line for line in loaded.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
    dom = loaded.stdout
    for div in PLOT_IDS:
        start = dom.index(f'id="{div}"')
        end = dom.find('class="plotly-graph-div"', start + 1)
        drawn = dom[start : end if end > 0 else len(dom)]
        sizes = re.findall(r'<svg class="main-svg"[^>]* width="(\d+)" height="(\d+)"', drawn)
        assert sizes and all(int(w) > 0 and int(h) > 0 for w, h in sizes), div
        # Plotly draws its marks as SVG paths (heatmaps as an image): the plot is not empty.
        assert re.search(r'class="(point|bars|hm|js-line)"|<image', drawn), div
    shot = tmp_path / "report.png"
    _chromium(tmp_path, f"--screenshot={shot}", page.as_uri())
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")
