"""The storage layer: the only code that talks to fsspec.

A checkpoint is listed once, recursively, into a :class:`Listing` of :class:`FileEntry`
(checkpoint-relative path, size, modification time). Everything later works from that
listing; there are no per-file exists/HEAD checks, and file contents are only read on demand.

Modules, from the outside in:

* ``core``: :class:`Storage`, the operations: list, read (whole, ranged, streamed,
  prefetched), write (atomic or not, inside the root or in a quarantine), move, delete;
* ``location``: where a storage is (filesystem, root, URL) and the containment check every
  change goes through;
* ``listing``: :class:`FileEntry`, :class:`Listing` and the two ways of listing a tree;
* ``ranged``: file objects over ranged GETs (streams and zips read without a HEAD);
* ``urls``: scheme aliases (``s3a://`` is ``s3://``), storage options, :func:`redact_url`;
* ``credentials``: ADLS and GCS with no credential configured refused before any request,
  Azure's credential chain asked once;
* ``errors``: store failures as one-line :class:`~ckpt_cli.errors.CkptError`;
* ``stats``: :class:`StorageStats` and the hooks that count object-store requests.
"""

from ckpt_cli.storage.core import Storage
from ckpt_cli.storage.errors import classify_store_error, store_error
from ckpt_cli.storage.listing import FileEntry, Listing
from ckpt_cli.storage.ranged import HEADER_BLOCK, STREAM_BLOCK
from ckpt_cli.storage.stats import StorageStats
from ckpt_cli.storage.urls import fsspec_options, redact_url

__all__ = [
    "HEADER_BLOCK",
    "STREAM_BLOCK",
    "FileEntry",
    "Listing",
    "Storage",
    "StorageStats",
    "classify_store_error",
    "fsspec_options",
    "redact_url",
    "store_error",
]
