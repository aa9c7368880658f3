"""Requests made through a storage, counted where they are made, for ``--stats``.

On object stores the counts come from a hook on the filesystem's HTTP client, which also
sees what fsspec does on its own (a HEAD inside ``open``, the pages of one ``find``, the
batches of one ``rm``):

* s3fs: botocore's ``before-call.s3`` event, one per API call, named by the operation.
* adlfs: the Azure SDK's ``raw_request_hook`` policy, one per HTTP attempt, by method and
  query (``comp=list`` is a listing, ``comp=batch`` a batch delete).

Other filesystems (local disk, ``memory://``, ``gs://``) are counted by
:class:`~ckpt_cli.storage.Storage` itself, one per call it makes.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ckpt_cli.units import human_bytes


@dataclass
class StorageStats:
    """Requests made through one or more storages; the caller that wants them owns it.

    On local disk a "list" is one directory scanned, a "get" one file opened, a "delete" one
    unlink. ``files_read`` counts ckpt's own reads of checkpoint files, on any store.
    """

    list: int = 0
    head: int = 0
    get: int = 0
    put: int = 0  # puts and copies
    delete: int = 0
    other: int = 0
    bytes_read: int = 0
    files_read: int = 0

    def bump(self, kind: str, n: int = 1) -> None:
        setattr(self, kind, getattr(self, kind) + n)

    def to_json(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def summary(self) -> str:
        """One line for humans: ``requests: 2 list, 0 head, 14 get, ...; 31.2 kB read``."""
        counts = ", ".join(
            f"{getattr(self, n)} {label}"
            for n, label in (
                ("list", "list"),
                ("head", "head"),
                ("get", "get"),
                ("put", "put/copy"),
                ("delete", "delete"),
            )
        )
        extra = f", {self.other} other" if self.other else ""
        return f"requests: {counts}{extra}; {human_bytes(self.bytes_read)} read"


_S3_KINDS = {
    "ListObjectsV2": "list",
    "ListObjects": "list",
    "ListObjectVersions": "list",
    "ListBuckets": "list",
    "ListMultipartUploads": "list",
    "ListParts": "list",
    "HeadObject": "head",
    "HeadBucket": "head",
    "GetObject": "get",
    "PutObject": "put",
    "CopyObject": "put",
    "UploadPart": "put",
    "UploadPartCopy": "put",
    "CreateMultipartUpload": "put",
    "CompleteMultipartUpload": "put",
    "DeleteObject": "delete",
    "DeleteObjects": "delete",
    "AbortMultipartUpload": "delete",
}


def s3_kind(operation: str) -> str:
    return _S3_KINDS.get(operation, "other")


def azure_kind(method: str, query: str) -> str:
    method = method.upper()
    params = query.lower()
    if method == "HEAD":
        return "head"
    if method == "GET":
        if "comp=list" in params:
            return "list"
        if "restype=container" in params or "comp=" in params:
            return "head"  # container or blob properties, metadata, tags
        return "get"
    if method == "PUT":
        return "put"
    if method == "DELETE" or (method == "POST" and "comp=batch" in params):
        return "delete"
    return "other"


def attach_request_counter(fs: Any, stats: StorageStats) -> bool:
    """Hook ``stats`` into ``fs``'s HTTP client; False when ``fs`` is not one we can hook."""
    kind = type(fs).__name__
    if kind == "S3FileSystem":
        return _attach_s3(fs, stats)
    if kind == "AzureBlobFileSystem":
        return _attach_azure(fs, stats)
    return False


def _attach_s3(fs: Any, stats: StorageStats) -> bool:
    try:
        fs.connect()  # builds the client; no request is made
        events = fs.s3.meta.events
    except Exception:  # an unusual s3fs: fall back to counting ckpt's own calls
        return False

    def before_call(model: Any = None, **_: Any) -> None:
        stats.bump(s3_kind(getattr(model, "name", "")))

    events.register("before-call.s3", before_call)
    return True


def _attach_azure(fs: Any, stats: StorageStats) -> bool:
    from urllib.parse import urlsplit

    try:
        policies = fs.service_client._pipeline._impl_policies
    except AttributeError:
        return False
    hooks = [p for p in policies if type(p).__name__ == "StorageRequestHook"]
    if not hooks:
        return False

    def on_request(request: Any) -> None:
        http = request.http_request
        stats.bump(azure_kind(http.method, urlsplit(http.url).query))

    for hook in hooks:
        hook._request_callback = on_request
    return True
