"""``ckpt state delete`` of 1% of the keys of a state, HDFS-backed and RocksDB.

The states are the aggregations ``bench_replay.py`` builds with a real PySpark query
(``--keys`` distinct keys ``key-0``...; 4 partitions): HDFS deltas only, and RocksDB
with changelog checkpointing (so the deletion writes a changelog of deletes). The keys
deleted are every hundredth (``--where "key.k like ..."`` is not in the language: an
``in (...)`` list would be 10,000 literals long at 1M keys, so ``--keys FILE`` names them,
as an erasure request would).

Each round copies the state afresh (untimed, then :func:`common.warm`) and times a fresh
``ckpt state delete COPY --operator 0 --keys FILE --apply --yes --force``. CPU is the process
tree's; memory the peak of its summed RSS, also against the state's decompressed records.
Spark has no key deletion to compare with (its answer is a new checkpoint).

    .venv/bin/python benchmarks/bench_delete.py [--keys 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_replay import CHANGELOG, PROVIDER, ROCKSDB, build_spark, state_bytes  # noqa: E402
from common import (  # noqa: E402
    Case,
    Measurement,
    add_options,
    against_state,
    alternate,
    ckpt,
    data_dir,
    fresh_copy,
    machine,
    report,
    row,
)

PARTITIONS = 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    add_options(parser)
    args = parser.parse_args()
    keys = 20_000 if args.quick else args.keys
    states = {
        "HDFS (a .delta of removals)": build_spark(
            data_dir(f"replay-{keys}-{PARTITIONS}"), keys, PARTITIONS, False
        ),
        "RocksDB, changelog (a changelog of deletes)": build_spark(
            data_dir(f"replay-rocksdb-{keys}-{PARTITIONS}-changelog"),
            keys,
            PARTITIONS,
            False,
            {PROVIDER: ROCKSDB, CHANGELOG: "true"},
        ),
    }
    work = data_dir("delete", "runs")
    work.mkdir(parents=True, exist_ok=True)
    doomed = work / f"keys-{keys}.jsonl"
    doomed.write_text("".join(json.dumps({"k": f"key-{i}"}) + "\n" for i in range(0, keys, 100)))

    def run(name: str) -> Measurement:
        args = ["state", "delete", str(work / name), "--operator", "0", "--keys", str(doomed)]
        return ckpt(*args, "--apply", "--yes", "--force", "--json", output=work / f"{name}.out")

    cases = [
        Case(
            label,
            functools.partial(run, f"s{i}"),
            functools.partial(fresh_copy, src, work / f"s{i}"),
        )
        for i, (label, src) in enumerate(states.items())
    ]
    runs = alternate(cases, max(3, args.repeat))
    rows = []
    for i, (src, (name, measured)) in enumerate(zip(states.values(), runs.items(), strict=True)):
        size, _ = state_bytes(src)
        rows.append(row(name, measured, **against_state(measured, size)))
        done = json.loads((work / f"s{i}.out").read_text())
        assert done["matched"] == keys // 100, done["matched"]
    notes = (
        f"{machine()}. {keys:,} keys in {PARTITIONS} partitions; {keys // 100:,} deleted "
        "(1%), named in a --keys file; each run on a fresh copy, the two states alternating."
    )
    report(args, f"state delete, 1% of {keys:,} keys", notes, rows)


if __name__ == "__main__":
    main()
