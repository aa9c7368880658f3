"""Run every benchmark and regenerate the tables in benchmarks/README.md.

Each benchmark runs in its own process with ``--markdown`` (and ``--quick`` when given); its
section replaces its own between the README's ``run_all`` markers (the sections of the
benchmarks not run stay), after a header saying when, on which commit and machine the figures
were taken. A benchmark that fails leaves its
error in its section instead of stopping the others.

    .venv/bin/python benchmarks/run_all.py                 # full sizes: takes long
    .venv/bin/python benchmarks/run_all.py --quick         # small sizes: a smoke test
    .venv/bin/python benchmarks/run_all.py --only listing,replay --args replay="--keys 200000"
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import machine  # noqa: E402

BEGIN, END = "<!-- run_all:begin -->", "<!-- run_all:end -->"
# In the order of the README; name -> extra arguments of the full run.
BENCHMARKS: dict[str, list[str]] = {
    "replay": [],
    "decode": [],
    "readers": [],
    "unsaferow": [],
    "listing": [],
    "versions": [],
    "validate": [],
    "cleanup": [],
    "s3": ["--partitions", "50", "--versions", "40"],
    "engine": ["--no-spark"],
    "repartition": [],
    "convert": [],
    "delete": [],
}


def available() -> list[str]:
    """The benchmarks present that take the harness's options (benchmarks/common.py)."""
    names = []
    for name in BENCHMARKS:
        script = HERE / f"bench_{name}.py"
        if script.exists() and "add_options(" in script.read_text():
            names.append(name)
    return names


def run(name: str, args: argparse.Namespace, out: Path) -> str:
    """One benchmark's Markdown section (or its failure)."""
    section = out / f"{name}.md"
    when = dt.datetime.now(dt.timezone.utc)
    cmd = [sys.executable, str(HERE / f"bench_{name}.py"), "--markdown", str(section)]
    cmd += ["--repeat", str(args.repeat)]
    cmd += ["--quick"] if args.quick else args.extra.get(name, BENCHMARKS[name])
    print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0 or not section.exists():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return f"### bench_{name}.py\n\nFailed (exit {done.returncode}): `{tail[0]}`\n"
    return f"{section.read_text().rstrip()}\n\n(measured {when:%Y-%m-%d %H:%M} UTC)\n"


def commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE
    )
    return done.stdout.strip() or "unknown"


def regenerate(readme: Path, header: str, sections: dict[str, str]) -> None:
    """Rewrite the block between the markers: ``header``, then one section per benchmark, in
    BENCHMARKS order; sections of benchmarks not run this time are kept as they were."""
    text = readme.read_text() if readme.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        text = text.rstrip() + f"\n\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    kept = dict(re.findall(r"<!-- section:(\w+) -->\n(.*?)(?=<!-- section:|\Z)", old, re.S))
    kept.update(sections)
    body = [header, ""]
    for name in BENCHMARKS:
        if name in kept:
            body += [f"<!-- section:{name} -->", kept[name].strip(), ""]
    readme.write_text(f"{head}{BEGIN}\n" + "\n".join(body) + f"{END}{tail}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    parser.add_argument("--only", help="comma-separated names (e.g. listing,replay)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds per benchmark (>= 3)")
    parser.add_argument("--readme", type=Path, default=HERE / "README.md")
    parser.add_argument(
        "--args",
        action="append",
        default=[],
        metavar="NAME=ARGS",
        help='one benchmark\'s arguments instead of the defaults: replay="--keys 200000"',
    )
    args = parser.parse_args(argv)
    args.extra = {n: shlex.split(a) for n, _, a in (x.partition("=") for x in args.args)}
    names = available()
    if args.only:
        wanted = args.only.split(",")
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            raise SystemExit(f"no such benchmark: {', '.join(unknown)} (have: {', '.join(names)})")
        names = [n for n in names if n in wanted]
    started = dt.datetime.now(dt.timezone.utc)
    about = machine()
    with tempfile.TemporaryDirectory() as tmp:
        sections = {name: run(name, args, Path(tmp)) for name in names}
    mode = " --quick" if args.quick else ""
    header = (
        f"Last generated by `benchmarks/run_all.py{mode}` ({', '.join(names)}) on "
        f"{started:%Y-%m-%d %H:%M} UTC, commit {commit()}, {about}; each section says when it "
        f"was measured. Every figure is min / median of alternating runs "
        "(benchmarks/common.py). The machine may be shared with other work: wall times then "
        "carry the neighbours' load, CPU times much less."
    )
    regenerate(args.readme, header, sections)
    print(f"wrote {args.readme}")


if __name__ == "__main__":
    main()
