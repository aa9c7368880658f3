"""Property: over generated version histories, the cleanup plan never removes a file a
retained version needs, and stopping the cleanup after any number of deletions leaves every
retained version that was loadable still loadable.

Histories are checkpoints written to a temp dir with the layouts Spark writes (HDFS deltas and
snapshots; RocksDB zips naming shared SSTs, changelogs; format v2 attempts with lineage and a
commit log choosing one), plus orphan SSTs, temp files, missing files and random file ages.
Deletions are simulated on the listing (the model built without the deleted paths), so every
prefix of the deletion order can be checked cheaply.
"""

from __future__ import annotations

import io
import json
import os
import struct
import tempfile
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckpt_cli.cleanup import plan_cleanup
from ckpt_cli.core.model import Checkpoint, FileKind
from ckpt_cli.core.rebuild import StateUnavailable, plan_version
from ckpt_cli.errors import FormatError
from ckpt_cli.formats.compression import compress
from ckpt_cli.storage import Listing

NOW = 1_800_000_000.0
HDFS_CLASS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKS_CLASS = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


@dataclass
class History:
    provider: str  # hdfs, rocksdb, rocksdb-v2
    latest_batch: int
    retain: int
    min_age: float
    files: dict[str, bytes] = field(default_factory=dict)
    ages: dict[str, float] = field(default_factory=dict)
    # SSTs uploaded for the batch in flight whose zip is not written yet.
    in_flight: set[str] = field(default_factory=set)


def _utf(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


def _zip(ssts: list[tuple[str, str, int]]) -> bytes:
    meta = {
        "sstFiles": [
            {"localFileName": local, "dfsSstFileName": dfs, "sizeBytes": size}
            for local, dfs, size in ssts
        ],
        "numKeys": 0,
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("CURRENT", b"MANIFEST-000001\n")
        zf.writestr("metadata", "v1\n" + json.dumps(meta))
    return buf.getvalue()


@st.composite
def histories(draw: st.DrawFn) -> History:
    provider = draw(st.sampled_from(["hdfs", "rocksdb", "rocksdb-v2"]))
    latest = draw(st.integers(1, 18))
    top = latest + 1
    h = History(
        provider,
        latest,
        retain=draw(st.integers(1, 6)),
        min_age=draw(st.sampled_from([0.0, 1800.0, 4 * 3600.0])),
    )
    age = st.floats(0, 8 * 3600)
    first_log = draw(st.integers(0, latest))
    conf = {
        "spark.sql.shuffle.partitions": "1",
        "spark.sql.streaming.stateStore.providerClass": HDFS_CLASS
        if provider == "hdfs"
        else ROCKS_CLASS,
    }
    h.files["metadata"] = b'{"id":"q"}'
    for b in range(first_log, latest + 1):
        h.files[f"offsets/{b}"] = (
            f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{json.dumps(conf)}}}\n0'
        ).encode()
        h.ages[f"offsets/{b}"] = 3600.0 * 9 + (latest - b)
    first = draw(st.integers(1, top))  # the oldest version Spark's own cleanup left
    d = "state/0/0"
    if provider == "hdfs":
        for v in range(first, top + 2):  # top + 1: a batch in flight
            if draw(st.integers(0, 9)) > 0 or v == top + 1:
                h.files[f"{d}/{v}.delta"] = b"d"
            if v == first or draw(st.integers(0, 3)) == 0:
                h.files[f"{d}/{v}.snapshot"] = b"s"
        for b in range(first_log, latest + 1):
            h.files[f"commits/{b}"] = b'v1\n{"nextBatchWatermarkMs":0}'
    else:
        v2 = provider == "rocksdb-v2"
        pool: list[tuple[str, str, int]] = []
        chosen: dict[int, str] = {}
        lineage: list[tuple[int, str]] = []
        for v in range(first, top + 2):
            attempts = [str(uuid.UUID(int=draw(st.integers(0, 2**64)))) for _ in range(2)]
            winner = attempts[0]
            chosen[v] = winner
            is_zip = v == first or draw(st.integers(0, 2)) == 0
            if is_zip:
                new = f"{len(pool) + 1:06d}.sst"
                pool.append((new, f"{new[:-4]}-{uuid.uuid4()}.sst", draw(st.integers(1, 9))))
                keep = draw(st.lists(st.sampled_from(pool), unique=True, max_size=4))
                ssts = sorted({*keep, pool[-1]})
                for _, dfs, size in ssts:
                    h.files[f"{d}/SSTs/{dfs}"] = b"x" * size
                    h.ages[f"{d}/SSTs/{dfs}"] = 3600.0 * 8 - v * 60
                if v == top + 1 and draw(st.booleans()):
                    # Killed between uploading the SSTs and writing the zip.
                    h.in_flight.add(f"{d}/SSTs/{pool[-1][1]}")
                    is_zip = False
            names = attempts if v2 and draw(st.booleans()) else [winner]
            for attempt in names:
                suffix = f"_{attempt}" if v2 else ""
                if is_zip and (attempt == winner or draw(st.booleans())):
                    h.files[f"{d}/{v}{suffix}.zip"] = _zip(ssts)
                if v2:
                    body = _utf("v3") + _utf(
                        json.dumps([{"version": x, "checkpointUniqueId": i} for x, i in lineage])
                    )
                else:
                    body = b""
                if draw(st.integers(0, 9)) > 0:
                    h.files[f"{d}/{v}{suffix}.changelog"] = compress(
                        body + b"\xff\xff\xff\xff", "lz4"
                    )
            lineage = [] if is_zip else lineage
            lineage = [*lineage, (v, winner)]
        for _ in range(draw(st.integers(0, 3))):  # orphans: named by no zip
            name = f"{d}/SSTs/{draw(st.integers(50, 99)):06d}-{uuid.uuid4()}.sst"
            h.files[name] = b"o"
            h.ages[name] = draw(age)
        for b in range(first_log, latest + 1):
            if v2:
                ids = {"0": [[chosen[b + 1]]]} if b + 1 in chosen else {}
                h.files[f"commits/{b}"] = (
                    "v2\n" + json.dumps({"nextBatchWatermarkMs": 0, "stateUniqueIds": ids})
                ).encode()
            else:
                h.files[f"commits/{b}"] = b'v1\n{"nextBatchWatermarkMs":0}'
    for _ in range(draw(st.integers(0, 2))):
        name = f"{d}/.{draw(st.integers(1, top))}.delta.{uuid.uuid4()}.tmp"
        h.files[name] = b"t"
        h.ages[name] = draw(age)
    for path in h.files:
        if path not in h.ages and path.startswith("state/"):
            h.ages[path] = draw(age)
    return h


def write(h: History, root: Path) -> None:
    for rel, data in h.files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        mtime = NOW - h.ages.get(rel, 9 * 3600.0)
        os.utime(path, (mtime, mtime))


def loadable(ckpt: Checkpoint, version: int) -> bool:
    try:
        plan = plan_version(ckpt, 0, 0, version)
    except (StateUnavailable, FormatError):
        return False
    for f in plan.files:
        if f.kind is FileKind.ZIP:
            data = ckpt.storage.read_bytes(f.path)
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                meta = json.loads(zf.read("metadata").decode().split("\n", 1)[1])
            for sst in meta["sstFiles"]:
                entry = ckpt.listing.get(f"state/0/0/SSTs/{sst['dfsSstFileName']}")
                if entry is None or entry.size != sst["sizeBytes"]:
                    return False
    return True


def without(ckpt: Checkpoint, removed: set[str]) -> Checkpoint:
    return Checkpoint(ckpt.storage, Listing([e for e in ckpt.listing if e.path not in removed]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(h=histories())
def test_cleanup_never_breaks_a_retained_version(h: History) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write(h, root)
        ckpt = Checkpoint.open(str(root))
        top = h.latest_batch + 1
        window = range(max(1, top - h.retain), top + 1)
        before = {v for v in window if loadable(ckpt, v)}
        plan = plan_cleanup(ckpt, retain=h.retain, min_age=h.min_age, now=NOW)
        # Never a file younger than --min-age.
        assert all(d.mtime is None or d.mtime <= NOW - h.min_age for d in plan.deletions)
        # Never a state file of a batch in flight.
        assert not any(
            f"/{top + 1}." in d.path or f"/{top + 1}_" in d.path
            for d in plan.deletions
            if not d.path.split("/")[-1].startswith(".")
        )
        # Stop after any number of deletions: what was loadable stays loadable.
        paths = [d.path for d in plan.deletions]
        cuts = sorted({0, len(paths), *range(0, len(paths), max(1, len(paths) // 6))})
        for cut in cuts:
            after = without(ckpt, set(paths[:cut]))
            still = {v for v in window if loadable(after, v)}
            assert before <= still, (cut, paths[:cut], before - still)
        # SSTs of a version whose zip is not written yet survive (Spark's mtime rule).
        assert not h.in_flight & set(paths)
        # And the latest committed offsets/commit are never removed.
        assert f"offsets/{h.latest_batch}" not in paths
        assert f"commits/{h.latest_batch}" not in paths
