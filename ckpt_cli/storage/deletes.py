"""Deleting many objects on S3: sequential DeleteObjects requests of up to 1,000 keys.

s3fs's ``rm`` splits a list into the same batches but sends three at a time (so a later
batch can land before an earlier one) and drops the keys S3 refuses (``on_error="omit"``).
Here the batches go one after the other, in the caller's order, and a refused key stops the
deletion with its name: exactly ``ceil(keys / 1000)`` requests when all goes well.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ckpt_cli.errors import StorageAccessError

# The most keys one DeleteObjects request takes (S3 API reference, DeleteObjects).
S3_DELETE_BATCH = 1000


def is_s3(fs: Any) -> bool:
    return type(fs).__name__ == "S3FileSystem"


def delete_s3_objects(fs: Any, paths: Sequence[str]) -> int:
    """Delete ``paths`` ("bucket/key", one bucket) in order; returns the requests made.

    A key already gone is not an error (S3 reports it deleted). Raises StorageAccessError
    naming the first key S3 refused, after the request that refused it.
    """
    requests = 0
    for start in range(0, len(paths), S3_DELETE_BATCH):
        batch = [fs.split_path(p)[:2] for p in paths[start : start + S3_DELETE_BATCH]]
        buckets = {bucket for bucket, _ in batch}
        if len(buckets) != 1:
            raise ValueError(f"one bucket per delete, got {sorted(buckets)}")
        bucket = buckets.pop()
        objects = [{"Key": key} for _, key in batch]
        out = fs.call_s3(
            "delete_objects", Bucket=bucket, Delete={"Objects": objects, "Quiet": True}
        )
        requests += 1
        errors = out.get("Errors") or []
        if errors:
            first = errors[0]
            more = f" (and {len(errors) - 1} more keys)" if len(errors) > 1 else ""
            raise StorageAccessError(
                f"s3://{bucket}/{first.get('Key')}: not deleted: "
                f"{first.get('Code', 'error')}: {first.get('Message', '')}{more}"
            )
    fs.invalidate_cache()  # s3fs caches directory listings
    return requests
