"""Benchmark: `versions`, `validate` and `cleanup` on S3 (a local moto server), next to a naive
script that lists each folder and checks each file, with the requests each one makes.

Builds a synthetic checkpoint (``synthetic.py``: Spark's formats, HDFS-backed store) of
``--partitions`` x ``--versions``, starts ``moto_server`` on a free loopback port, uploads the
checkpoint and measures (benchmarks/common.py: each run in a forked child, ckpt and naive
alternating, ``--repeat`` rounds; before each cleanup the files it deletes are uploaded again,
untimed):

* ckpt: ``describe_versions``, ``validate``, ``plan_cleanup`` + ``apply_cleanup`` through
  :class:`~ckpt_cli.storage.Storage`; requests counted at the S3 client (as ``--stats`` does);
* naive, with boto3 as a hand-written script would: one delimited listing per folder, a HEAD
  per file, a GET per file read, one DeleteObject per file deleted.

    .venv/bin/python benchmarks/bench_s3.py [--partitions 200] [--versions 100] [--retain 10]

Latency on loopback is ~1 ms per request; a real S3 region adds 10-30 ms to each, so the
request counts, not the seconds, are what carries over.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import (  # noqa: E402
    Case,
    Measurement,
    add_options,
    alternate,
    data_dir,
    machine,
    measure_call,
    report,
)
from common import row as measured_row  # noqa: E402
from synthetic import build  # noqa: E402

from ckpt_cli.cleanup import apply_cleanup, plan_cleanup  # noqa: E402
from ckpt_cli.core.model import Checkpoint  # noqa: E402
from ckpt_cli.storage import StorageStats  # noqa: E402
from ckpt_cli.validate import validate  # noqa: E402
from ckpt_cli.versions import describe_versions  # noqa: E402

BUCKET = "bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_moto(port: int) -> subprocess.Popen[bytes]:
    exe = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen(
        [str(exe), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("moto_server did not start")


class Naive:
    """What a hand-written boto3 script does, counting its own calls."""

    def __init__(self, endpoint: str, prefix: str) -> None:
        import boto3

        self.s3 = boto3.client("s3", endpoint_url=endpoint)
        self.prefix = prefix
        self.calls: Counter[str] = Counter()

    def walk(self) -> list[tuple[str, int]]:
        """List each folder (delimited listings), then HEAD each file found."""
        files: list[str] = []
        folders = [self.prefix + "/"]
        while folders:
            folder = folders.pop()
            token: dict[str, Any] = {}
            while True:
                self.calls["list"] += 1
                page = self.s3.list_objects_v2(Bucket=BUCKET, Prefix=folder, Delimiter="/", **token)
                folders += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
                files += [o["Key"] for o in page.get("Contents", [])]
                if not page.get("IsTruncated"):
                    break
                token = {"ContinuationToken": page["NextContinuationToken"]}
        sized = []
        for key in files:
            self.calls["head"] += 1
            sized.append((key, self.s3.head_object(Bucket=BUCKET, Key=key)["ContentLength"]))
        return sized

    def get(self, key: str) -> bytes:
        self.calls["get"] += 1
        body: bytes = self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        return body

    def delete(self, key: str) -> None:
        self.calls["delete"] += 1
        self.s3.delete_object(Bucket=BUCKET, Key=key)


def latest_chain(files: list[tuple[str, int]], prefix: str, version: int) -> list[str]:
    """The delta/snapshot files a reader of ``version`` needs, per partition."""
    by_part: dict[str, list[tuple[int, str, str]]] = {}
    for key, _ in files:
        rel = key[len(prefix) + 1 :]
        parts = rel.split("/")
        if len(parts) == 4 and parts[0] == "state" and "." in parts[3]:
            v, _, kind = parts[3].partition(".")
            if v.isdigit() and kind in ("delta", "snapshot") and int(v) <= version:
                by_part.setdefault("/".join(parts[:3]), []).append((int(v), kind, key))
    needed: list[str] = []
    for entries in by_part.values():
        snapshots = [v for v, kind, _ in entries if kind == "snapshot"]
        base = max(snapshots) if snapshots else 0
        needed += [k for v, kind, k in entries if v > base or (v == base and kind == "snapshot")]
    return needed


def requests(counts: StorageStats | Counter[str]) -> dict[str, str]:
    def get(kind: str) -> int:
        return counts[kind] if isinstance(counts, Counter) else int(getattr(counts, kind))

    return {kind: f"{get(kind):,}" for kind in ("list", "head", "get", "put", "delete")}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--retain", type=int, default=10)
    add_options(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.partitions, args.versions, args.retain = 4, 12, 2
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    local = data_dir(f"s3-{args.partitions}x{args.versions}-nocrc", "ckpt")
    # No .crc sidecars: Hadoop's S3A and ABFS connectors do not write them.
    totals = build(
        local,
        partitions=args.partitions,
        versions=args.versions,
        keys=args.partitions * 50,
        crc=False,
    )
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    options = {"endpoint_url": endpoint}
    moto = start_moto(port)
    try:
        import s3fs

        fs = s3fs.S3FileSystem(endpoint_url=endpoint, skip_instance_cache=True)
        fs.mkdir(BUCKET)
        staging = local.parent / "upload"
        if staging.exists():
            shutil.rmtree(staging)
        shutil.copytree(local, staging, ignore=shutil.ignore_patterns(".complete"))
        start = time.perf_counter()
        fs.put(str(staging), f"{BUCKET}/ckpt", recursive=True)
        objects = len(fs.find(f"{BUCKET}/ckpt"))
        upload = time.perf_counter() - start
        url = f"s3://{BUCKET}/ckpt"
        v = args.versions
        counted: dict[str, StorageStats | Counter[str]] = {}

        def timed(name: str, fn: Callable[[], StorageStats | Counter[str]]) -> Case:
            def run() -> Measurement:
                measured, counted[name] = measure_call(fn)
                return measured

            return Case(name, run)

        def ckpt_versions() -> StorageStats:
            ckpt = Checkpoint.open(url, options)
            describe_versions(ckpt)
            return ckpt.storage.stats

        def naive_versions() -> Counter[str]:
            naive = Naive(endpoint, "ckpt")
            naive.walk()
            for key in ("metadata", f"offsets/{v - 1}", f"commits/{v - 1}"):
                naive.get(f"ckpt/{key}")
            return naive.calls

        def ckpt_validate() -> StorageStats:
            ckpt = Checkpoint.open(url, options)
            result = validate(ckpt)
            assert result.to_json()["ok"], result.to_json()["findings"][:3]
            return ckpt.storage.stats

        def naive_validate() -> Counter[str]:
            naive = Naive(endpoint, "ckpt")
            files = naive.walk()
            logs = ["metadata", f"offsets/{v - 1}", f"offsets/{v - 2}", f"commits/{v - 1}"]
            for key in latest_chain(files, "ckpt", v) + [f"ckpt/{k}" for k in logs]:
                naive.get(key)
            return naive.calls

        first = Checkpoint.open(url, options)
        deleted = [d.path for d in plan_cleanup(first, retain=args.retain, min_age=0).deletions]

        def ckpt_cleanup() -> StorageStats:
            ckpt = Checkpoint.open(url, options)
            plan = plan_cleanup(ckpt, retain=args.retain, min_age=0)
            # Manifest beside the checkpoint, on S3; min_age=0 on just-uploaded objects: forced.
            result = apply_cleanup(ckpt, plan, force=True)
            assert result.deleted == len(deleted), (result.deleted, len(deleted))
            return ckpt.storage.stats

        def naive_cleanup() -> Counter[str]:
            naive = Naive(endpoint, "ckpt")
            naive.walk()
            for p in deleted:
                naive.delete(f"ckpt/{p}")
            return naive.calls

        def restore() -> None:
            fs.put([str(staging / p) for p in deleted], [f"{BUCKET}/ckpt/{p}" for p in deleted])

        rows = []
        for name, ours, theirs in (
            ("versions", ckpt_versions, naive_versions),
            ("validate", ckpt_validate, naive_validate),
            (f"cleanup ({len(deleted):,} files)", ckpt_cleanup, naive_cleanup),
        ):
            cases = [timed(f"ckpt {name}", ours), timed(f"naive {name}", theirs)]
            if name.startswith("cleanup"):
                cases = [Case(c.name, c.run, prepare=restore) for c in cases]
            for case_name, measured in alternate(cases, args.repeat).items():
                rows.append(measured_row(case_name, measured, **requests(counted[case_name])))
        report(
            args,
            f"S3 (moto on loopback): {args.partitions} partitions x {args.versions} versions, "
            f"{objects:,} objects",
            f"Forked children, ckpt and naive alternating, {args.repeat} rounds; {machine()}. "
            f"{totals['bytes'] / 1e6:.1f} MB uploaded in {upload:.0f} s. Requests are the last "
            "round's, counted at the client. Latency on loopback is ~1 ms a request; a real S3 "
            "region adds 10-30 ms to each, so the request counts, not the seconds, carry over. "
            "ckpt deletes in ceil(files/1000) DeleteObjects requests; the naive script one "
            "DeleteObject per file.",
            rows,
        )
    finally:
        moto.terminate()
        moto.wait(10)


if __name__ == "__main__":
    main()
