"""Whether the files of a plan load as Spark loads them, before any row is read.

A plan (``replay.plan``) says which files rebuild a version from the listing alone. Loading
can still fail on their bytes: a zip cut short or damaged, an SST or log a zip names that is
gone or of another size (Spark's file manager refuses it), a delta, snapshot or changelog
that does not decode to its end. ``problems`` finds each of these the way ``validate`` does
(it uses the same two checks, ``shared_file_problems`` and ``decode_stream``), so a
best-effort replay can fall back to an older version *before* it writes a row of the broken
one.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import ExitStack

from ckpt_cli.core.model import Checkpoint, FileKind
from ckpt_cli.core.rebuild import ReplayPlan, StateUnavailable, codec_of
from ckpt_cli.errors import FormatError
from ckpt_cli.formats import compression, records, rocksdb_zip
from ckpt_cli.storage import Listing, Storage

# (finding code, message, paths): as validate reports it.
Problem = tuple[str, str, list[str]]


def shared_file_problems(
    listing: Listing, zip_path: str, meta: rocksdb_zip.RocksDBCheckpointMetadata
) -> Iterator[Problem]:
    """Every SST and RocksDB log the zip names must be listed, with the size it records."""
    store_dir = zip_path.rsplit("/", 1)[0]
    for subdir, files in (("SSTs", meta.sst_files), ("logs", meta.log_files)):
        for f in files:
            path = f"{store_dir}/{subdir}/{f.dfs_file_name}"
            entry = listing.get(path)
            if entry is None:
                yield (
                    "MISSING_SST",
                    f"{path}: named by {zip_path} but not in the checkpoint",
                    [path, zip_path],
                )
            elif entry.size != f.size_bytes:
                yield (
                    "SST_SIZE_MISMATCH",
                    f"{path}: {entry.size} bytes, {zip_path} records {f.size_bytes}",
                    [path, zip_path],
                )


def decode_stream(
    storage: Storage, path: str, kind: FileKind, codec: str, data: bytes | None = None
) -> None:
    """Decode a delta, snapshot or changelog to its end (FormatError where it breaks)."""
    with ExitStack() as stack:
        fh = (
            io.BytesIO(data) if data is not None else stack.enter_context(storage.open_stream(path))
        )
        chunks = compression.decompressed_chunks(path, fh, codec=codec)
        if kind is FileKind.CHANGELOG:
            for _ in records.open_changelog(path, chunks).records():
                pass
        else:
            for _ in records.iter_kv_records(path, chunks, snapshot=kind is FileKind.SNAPSHOT):
                pass


def problems(ckpt: Checkpoint, plan: ReplayPlan) -> list[Problem]:
    """What stops ``plan`` from loading (empty: it loads), its base first."""
    from ckpt_cli.core.read import read_zip_metadata

    found: list[Problem] = []
    for f in plan.files:
        try:
            if f.entry.size == 0:
                found.append(("EMPTY_FILE", f"{f.path}: empty file", [f.path]))
            elif f.kind is FileKind.ZIP:
                meta = read_zip_metadata(ckpt.storage, f.path, f.entry.size)
                found.extend(shared_file_problems(ckpt.listing, f.path, meta))
            else:
                decode_stream(ckpt.storage, f.path, f.kind, codec_of(ckpt))
        except FormatError as exc:
            found.append((exc.code, str(exc), [f.path]))
        except StateUnavailable as exc:
            found.append((exc.reason, exc.message, list(exc.paths)))
        if found:
            break  # the first is enough to fall back
    return found
