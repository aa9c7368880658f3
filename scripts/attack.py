"""Run the attack kit by hand: ``python scripts/attack.py --seeds 0:50``; prints every failure."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.attack import sweep  # noqa: E402
from tests.conftest import CASES  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="0:10", help="start:stop")
    parser.add_argument("--case", action="append", help="only these fixture cases")
    args = parser.parse_args()
    start, stop = (int(x) for x in args.seeds.split(":"))
    cases = [c for c in CASES if not args.case or c.name in args.case]
    with tempfile.TemporaryDirectory() as tmp:
        outcome = sweep(range(start, stop), Path(tmp), cases)
    for f in outcome.failures:
        print(f, flush=True)
    print(f"runs={outcome.runs} failures={len(outcome.failures)} slowest={outcome.slowest:.2f}s")
    return 1 if outcome.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
