"""Deletes on S3 take exactly ceil(keys / 1000) DeleteObjects requests, sent in order, and a
key S3 refuses stops the deletion with its name (issue 18, item 5). Counted on the moto
server's own request log and at the client."""

from __future__ import annotations

import contextlib
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.cleanup import apply_cleanup, plan_cleanup
from ckpt_cli.core.model import Checkpoint
from ckpt_cli.errors import StorageAccessError
from ckpt_cli.storage import Storage
from ckpt_cli.storage.deletes import delete_s3_objects
from tests.servers import S3Server

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from synthetic import build  # noqa: E402

KEYS = 2500


@pytest.mark.s3
def test_2500_keys_take_3_requests_and_are_all_gone(s3_server: S3Server) -> None:
    fs = s3_server.fs()
    bucket, prefix = "deletes", "ckpt"
    with contextlib.suppress(FileExistsError):
        fs.mkdir(bucket)
    rels = [f"state/0/{i % 50}/{i}.delta" for i in range(KEYS)]
    fs.pipe({f"{bucket}/{prefix}/{rel}": b"x" for rel in rels})
    fs.pipe({f"{bucket}/{prefix}/keep": b"kept"})
    storage = Storage.from_url(f"s3://{bucket}/{prefix}", s3_server.options)
    assert len(storage.list_all()) == KEYS + 1

    mark = s3_server.mark()
    requests = storage.delete_many(rels)
    served = s3_server.requests_since(mark)
    assert requests == math.ceil(KEYS / 1000) == 3
    assert storage.stats.delete == 3 == served["delete"]
    assert sum(served.values()) == 3  # nothing else: no listing, no HEAD per key

    left = [
        e.path for e in Storage.from_url(f"s3://{bucket}/{prefix}", s3_server.options).list_all()
    ]
    assert left == ["keep"]
    # Already gone is not an error: one more request, nothing raised.
    assert storage.delete_many(rels[:10]) == 1


@pytest.mark.s3
def test_a_cleanup_spanning_phases_takes_ceil_files_over_1000_requests(
    s3_server: S3Server, tmp_path: Path
) -> None:
    # Old versions and old log entries are two phases of the plan, neither a multiple of
    # 1000: batched per phase they would take one request more than ceil(files / 1000).
    local = tmp_path / "ckpt"
    build(local, partitions=12, versions=90, keys=240, crc=False)
    (local / ".complete").unlink()
    url = s3_server.upload(local, "deletes", f"cleanup-{tmp_path.name}")
    ckpt = Checkpoint.open(url, s3_server.options)
    plan = plan_cleanup(ckpt, retain=2, min_age=0)
    phases = Counter(d.phase for d in plan.deletions)
    files = len(plan.deletions)
    assert len(phases) >= 2 and files > 1000
    assert sum(math.ceil(n / 1000) for n in phases.values()) > math.ceil(files / 1000)

    mark = s3_server.mark()
    result = apply_cleanup(ckpt, plan, force=True)
    served = s3_server.requests_since(mark)
    assert result.deleted == files
    assert result.delete_requests == math.ceil(files / 1000)
    assert served["delete"] == result.delete_requests + 1  # and the lock, released
    left = {e.path for e in Checkpoint.open(url, s3_server.options).listing}
    assert not left & {d.path for d in plan.deletions}


class _Refusing:
    """An s3fs stand-in whose second DeleteObjects refuses one key."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def split_path(self, path: str) -> tuple[str, str, None]:
        bucket, _, key = path.partition("/")
        return bucket, key, None

    def call_s3(self, method: str, **kwargs: Any) -> dict[str, Any]:
        assert method == "delete_objects"
        keys = [o["Key"] for o in kwargs["Delete"]["Objects"]]
        self.batches.append(keys)
        if len(self.batches) == 2:
            return {"Errors": [{"Key": keys[7], "Code": "AccessDenied", "Message": "Denied"}]}
        return {}

    def invalidate_cache(self) -> None:
        pass


def test_a_refused_key_stops_the_deletion_naming_it() -> None:
    fs = _Refusing()
    paths = [f"b/ckpt/f{i:05d}" for i in range(3500)]
    with pytest.raises(StorageAccessError, match=r"s3://b/ckpt/f01007: not deleted: AccessDenied"):
        delete_s3_objects(fs, paths)
    # In order, 1000 keys a request, and nothing sent after the refusal.
    assert [len(b) for b in fs.batches] == [1000, 1000]
    assert fs.batches[0][0] == "ckpt/f00000" and fs.batches[1][0] == "ckpt/f01000"
