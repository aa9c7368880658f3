"""One contract for :class:`~ckpt_cli.storage.Storage`, run on every backend: local disk,
``memory://``, S3 (the moto server) and ADLS (Azurite).

The way fsspec's ``tests/abstract`` works: the test functions are written once against a
:class:`Backend` (a fresh, empty location and a raw filesystem to set files up and check
them behind the storage's back); only the fixture knows which store it is. Where a store
legitimately behaves otherwise (symbolic links exist only on local disk), the test says so
and skips.
"""

from __future__ import annotations

import io
import os
import time
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.errors import (
    CheckpointNotFound,
    CkptError,
    OutsideCheckpointError,
    StorageAccessError,
)
from ckpt_cli.storage import HEADER_BLOCK, Storage, StorageStats


@dataclass
class Backend:
    """A fresh location on one store: ``url`` for ckpt, ``root`` for the raw filesystem."""

    name: str
    url: str
    root: str
    options: dict[str, Any]
    fs: Any  # the raw filesystem, not the storage's: what is really there
    missing_url: str  # a location whose bucket/container (or directory) does not exist

    @property
    def is_local(self) -> bool:
        return self.name == "local"

    @property
    def counts_own_requests(self) -> bool:
        """local and memory:// are counted by Storage's own calls, exactly."""
        return self.name in ("local", "memory")

    def storage(self, stats: StorageStats | None = None) -> Storage:
        return Storage.from_url(self.url, self.options, stats)

    def put(self, rel: str, data: bytes) -> None:
        self.fs.pipe_file(f"{self.root}/{rel}", data)

    def get(self, rel: str) -> bytes | None:
        try:
            return bytes(self.fs.cat_file(f"{self.root}/{rel}"))
        except FileNotFoundError:
            return None

    def make_dir(self, rel: str) -> None:
        """An empty directory as each store has them: a real one on local disk and in
        memory, a "folder" marker object on S3 (as consoles make them), a marker blob with
        ``hdi_isfolder`` metadata on Azure (as Hadoop's connectors make them)."""
        if self.name in ("local", "memory"):
            self.fs.mkdir(f"{self.root}/{rel}")
        elif self.name == "s3":
            self.put(f"{rel}/", b"")
        else:
            from azure.storage.blob import BlobServiceClient

            container, _, prefix = self.root.partition("/")
            client = BlobServiceClient.from_connection_string(self.options["connection_string"])
            with client:
                client.get_blob_client(container, f"{prefix}/{rel}").upload_blob(
                    b"", metadata={"hdi_isfolder": "true"}
                )

    def sibling(self, name: str) -> str:
        """A location beside the root (a quarantine), as the raw filesystem names it."""
        return f"{self.root}.{name}"


def _local(tmp_path: Path) -> Iterator[Backend]:
    from fsspec.implementations.local import LocalFileSystem

    root = str(tmp_path / "ckpt")
    os.makedirs(root)
    yield Backend(
        "local",
        root,
        root,
        {},
        LocalFileSystem(auto_mkdir=True),
        str(tmp_path / "nothing-here" / "ckpt"),
    )


def _memory() -> Iterator[Backend]:
    import fsspec

    fs = fsspec.filesystem("memory")
    name = f"ckpt-{uuid.uuid4().hex}"
    fs.mkdir(f"/{name}")
    try:
        yield Backend("memory", f"memory://{name}", f"/{name}", {}, fs, f"memory://{name}-none/x")
    finally:
        for path in fs.find(f"/{name}") + fs.find(f"/{name}.q"):
            fs.rm_file(path)


def _object_store(server: Any, scheme: str) -> Iterator[Backend]:
    fs = server.fs()
    bucket = f"contract-{uuid.uuid4().hex[:16]}"
    fs.mkdir(bucket)
    try:
        yield Backend(
            server.scheme,
            f"{scheme}://{bucket}/ckpt",
            f"{bucket}/ckpt",
            server.options,
            fs,
            f"{scheme}://missing-{uuid.uuid4().hex[:16]}/ckpt",
        )
    finally:
        fs.rm(bucket, recursive=True)


@pytest.fixture(
    params=[
        "local",
        "memory",
        pytest.param("s3", marks=pytest.mark.s3),
        pytest.param("azure", marks=pytest.mark.azure),
    ]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "local":
        yield from _local(tmp_path)
    elif request.param == "memory":
        yield from _memory()
    elif request.param == "s3":
        yield from _object_store(request.getfixturevalue("s3_server"), "s3")
    else:
        yield from _object_store(request.getfixturevalue("azure_server"), "abfs")


def delta(stats: StorageStats, before: dict[str, int]) -> dict[str, int]:
    """What changed in ``stats`` since ``before`` (a ``to_json()``), zeros left out."""
    return {k: v - before[k] for k, v in stats.to_json().items() if v != before[k]}


def one_line(exc: CkptError) -> str:
    text = str(exc.message)
    assert "\n" not in text and "Traceback" not in text, text
    return text


# -- listing -----------------------------------------------------------------------------------


def test_listing_has_sizes_mtimes_and_nested_files_only(backend: Backend) -> None:
    files = {"metadata": b"m", "offsets/0": b"o" * 10, "state/0/1/2.delta": b"d" * 100}
    started = time.time()
    for rel, data in files.items():
        backend.put(rel, data)
    backend.make_dir("sources/0")
    listing = backend.storage().list_all()
    assert [(e.path, e.size) for e in listing] == [(k, len(v)) for k, v in sorted(files.items())]
    assert listing.get("offsets/0") == next(e for e in listing if e.path == "offsets/0")
    for entry in listing:
        assert entry.mtime is not None and abs(entry.mtime - started) < 600, entry


def test_listing_an_empty_root_is_empty_and_a_missing_one_is_not_found(backend: Backend) -> None:
    backend.put("d/x", b"x")
    assert [e.path for e in backend.storage().list_all()] == ["d/x"]
    with pytest.raises(CheckpointNotFound) as info:
        Storage.from_url(backend.missing_url, backend.options).list_all()
    one_line(info.value)


def test_listing_is_counted(backend: Backend) -> None:
    for rel in ("a", "d/b", "d/e/c"):
        backend.put(rel, b"x")
    storage = backend.storage()
    storage.list_all()
    counted = delta(storage.stats, StorageStats().to_json())
    # One scandir per directory on local disk; one find (one paged listing) elsewhere.
    assert counted == {"list": 3 if backend.is_local else 1}


# -- reading -----------------------------------------------------------------------------------


def test_read_bytes_whole_and_ranged_cost_one_get_each(backend: Backend) -> None:
    data = bytes(range(256)) * 4
    backend.put("state/0/0/1.delta", data)
    storage = backend.storage()
    storage.list_all()
    before = storage.stats.to_json()
    assert storage.read_bytes("state/0/0/1.delta") == data
    assert storage.read_bytes("state/0/0/1.delta", 10, 20) == data[10:20]
    assert delta(storage.stats, before) == {"get": 2, "files_read": 2, "bytes_read": len(data) + 10}


def test_open_stream_reads_whole_files_and_headers(backend: Backend) -> None:
    data = os.urandom(HEADER_BLOCK + 5000)
    backend.put("state/0/0/1.changelog", data)
    storage = backend.storage()
    storage.list_all()
    with storage.open_stream("state/0/0/1.changelog") as fh:
        parts = [fh.read(100), fh.read(HEADER_BLOCK), fh.read()]
    assert b"".join(parts) == data and len(parts[0]) == 100
    with storage.open_stream("state/0/0/1.changelog", header_only=True) as fh:
        assert fh.read(16) == data[:16]
    assert storage.stats.bytes_read == len(data) + 16
    assert storage.stats.files_read == 2


def test_open_random_reads_a_zip_from_its_end(backend: Backend) -> None:
    buffer = io.BytesIO()
    member = os.urandom(3 * HEADER_BLOCK)
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("CURRENT", b"MANIFEST-000001\n")
        zf.writestr("000001.sst", member)
    data = buffer.getvalue()
    backend.put("state/0/0/2.zip", data)
    storage = backend.storage()
    storage.list_all()
    with storage.open_random("state/0/0/2.zip") as fh:
        fh.seek(-10, io.SEEK_END)
        assert fh.read(10) == data[-10:]
        fh.seek(0)
        assert fh.read(4) == data[:4]
        with zipfile.ZipFile(fh) as zf:
            assert zf.read("000001.sst") == member
    assert storage.stats.files_read == 1


def test_prefetch_serves_later_reads(backend: Backend) -> None:
    files = {f"offsets/{i}": f"v1\n{i}".encode() for i in range(5)}
    for rel, data in files.items():
        backend.put(rel, data)
    storage = backend.storage()
    storage.list_all()
    storage.prefetch([*files, "offsets/missing"])
    storage.prefetch(list(files), heads=True)
    gets = storage.stats.get
    assert {rel: storage.read_bytes(rel) for rel in files} == files
    with storage.open_stream("offsets/3", header_only=True) as fh:
        assert fh.read() == files["offsets/3"]
    # Local reads are cheap: nothing is fetched ahead there. Elsewhere the reads cost nothing.
    assert storage.stats.get - gets == (len(files) + 1 if backend.is_local else 0)
    with pytest.raises(StorageAccessError) as info:
        storage.read_bytes("offsets/missing")  # left out of the prefetch, fails when read
    assert one_line(info.value).startswith("offsets/missing: ")


# -- writing -----------------------------------------------------------------------------------


@pytest.mark.parametrize("atomic", [False, True])
def test_write_bytes_creates_parents_and_replaces(backend: Backend, atomic: bool) -> None:
    storage = backend.storage()
    storage.write_bytes("state/0/0/3.snapshot", b"old", atomic=atomic)
    storage.write_bytes("state/0/0/3.snapshot", b"new", atomic=atomic)
    assert backend.get("state/0/0/3.snapshot") == b"new"
    # No temp file left behind by the atomic protocol.
    assert [e.path for e in backend.storage().list_all()] == ["state/0/0/3.snapshot"]
    if backend.counts_own_requests:
        assert delta(storage.stats, StorageStats().to_json()) == {"put": 2}
    else:
        assert storage.stats.put >= 2 and storage.stats.delete == 0


def test_open_write_streams_one_file(backend: Backend) -> None:
    storage = backend.storage()
    with storage.open_write("out/partition=0/part-0.jsonl") as fh:
        for i in range(1000):
            fh.write(b'{"key": %d}\n' % i)
    assert backend.get("out/partition=0/part-0.jsonl") == b"".join(
        b'{"key": %d}\n' % i for i in range(1000)
    )
    if backend.counts_own_requests:
        assert storage.stats.put == 1
    else:
        assert storage.stats.put >= 1


def test_open_write_errors_name_the_location(backend: Backend) -> None:
    if backend.name == "memory":
        pytest.skip("memory:// has no failing writes: any path can be created")
    if backend.is_local:
        backend.put("out", b"a file where a directory is wanted")
        storage, rel = backend.storage(), "out/part-0"
    else:
        storage, rel = Storage.from_url(backend.missing_url, backend.options), "part-0"
    with pytest.raises(CkptError) as info, storage.open_write(rel) as fh:
        fh.write(b"x" * 100)
    assert one_line(info.value).startswith(f"{storage.url}/{rel}: ")


def test_writer_bugs_are_not_store_errors(backend: Backend) -> None:
    with pytest.raises(ZeroDivisionError), backend.storage().open_write("out/x") as fh:
        fh.write(b"x")
        _ = 1 // 0


def test_absolute_files_within_a_quarantine(backend: Backend) -> None:
    storage = backend.storage()
    quarantine = backend.sibling("q")
    location = f"{quarantine}/files/offsets/7"
    storage.write_bytes_absolute(location, b'{"a": 1}', within=quarantine, atomic=True)
    assert bytes(backend.fs.cat_file(location)) == b'{"a": 1}'
    storage.write_bytes_absolute(f"{quarantine}/manifest.json", b"{}", within=quarantine)
    assert storage.read_bytes_absolute(location) == b'{"a": 1}'
    url = (
        backend.url.split("://")[0] + "://" + location.lstrip("/")
        if "://" in backend.url
        else location
    )
    assert storage.read_text_absolute(url) == '{"a": 1}'
    assert storage.exists_absolute(location)
    assert not storage.exists_absolute(f"{quarantine}/files/offsets/8")
    with pytest.raises(CheckpointNotFound) as info:
        storage.read_text_absolute(f"{quarantine}/files/offsets/8")
    one_line(info.value)


def test_move_out_and_back_in(backend: Backend) -> None:
    backend.put("state/0/1/5.delta", b"delta")
    storage = backend.storage()
    quarantine = backend.sibling("q")
    storage.move_out(
        "state/0/1/5.delta", f"{quarantine}/files/state/0/1/5.delta", within=quarantine
    )
    assert backend.get("state/0/1/5.delta") is None
    assert bytes(backend.fs.cat_file(f"{quarantine}/files/state/0/1/5.delta")) == b"delta"
    storage.move_in(f"{quarantine}/files/state/0/1/5.delta", "state/0/1/5.delta", within=quarantine)
    assert backend.get("state/0/1/5.delta") == b"delta"
    assert not backend.fs.exists(f"{quarantine}/files/state/0/1/5.delta")
    with pytest.raises(StorageAccessError, match="no longer exists"):
        storage.move_out("state/0/1/6.delta", f"{quarantine}/files/x", within=quarantine)
    if backend.counts_own_requests:
        assert storage.stats.put == 3  # two moves and the failed one, a rename each
    else:
        assert storage.stats.put >= 2 and storage.stats.delete >= 2  # copies and deletes


def test_create_new_is_exclusive(backend: Backend) -> None:
    storage, rival = backend.storage(), backend.storage()
    assert storage.read_small(".ckpt-lock", 100) is None
    assert storage.create_new(".ckpt-lock", b'{"token": "a"}')
    assert not rival.create_new(".ckpt-lock", b'{"token": "b"}')  # the first one stays
    assert rival.read_small(".ckpt-lock", 100) == b'{"token": "a"}'
    assert rival.read_small(".ckpt-lock", 5) == b'{"tok'
    rival.delete_many([".ckpt-lock"])
    assert rival.create_new(".ckpt-lock", b'{"token": "b"}')
    assert backend.get(".ckpt-lock") == b'{"token": "b"}'


def test_create_new_on_a_missing_location_is_one_line(backend: Backend) -> None:
    missing = Storage.from_url(backend.missing_url, backend.options)
    if backend.name == "memory":
        pytest.skip("memory:// has no missing locations: any path can be created")
    with pytest.raises(CheckpointNotFound) as info:
        missing.create_new(".ckpt-lock", b"{}")
    one_line(info.value)


# -- deleting ----------------------------------------------------------------------------------


def test_delete_many_deletes_and_counts(backend: Backend) -> None:
    for rel in ("offsets/0", "offsets/1", "commits/0", "commits/1"):
        backend.put(rel, b"x")
    storage = backend.storage()
    storage.list_all()
    before = storage.stats.to_json()
    requests = storage.delete_many(["offsets/0", "offsets/1"])
    # Local disk: one unlink per file; elsewhere: one batch request for the whole list.
    assert requests == (2 if backend.is_local else 1)
    assert delta(storage.stats, before) == {"delete": requests}
    # A file already gone (an interrupted cleanup) is no error, and the others still go.
    storage.delete_many(["offsets/gone-already", "commits/0"])
    assert [e.path for e in backend.storage().list_all()] == ["commits/1"]
    assert storage.delete_many([]) == 0


# -- containment -------------------------------------------------------------------------------


@pytest.mark.parametrize("rel", ["../outside", "state/../../outside", "a/./../../outside"])
def test_paths_out_of_the_root_are_refused(backend: Backend, rel: str) -> None:
    backend.put("keep", b"x")
    backend.fs.pipe_file(backend.sibling("outside-file"), b"precious")
    storage = backend.storage()
    with pytest.raises(OutsideCheckpointError):
        storage.contained(rel)
    assert rel in storage.outside([rel, "keep"]) and "keep" not in storage.outside([rel])
    with pytest.raises(OutsideCheckpointError):
        storage.write_bytes(rel, b"x")
    with pytest.raises(OutsideCheckpointError), storage.open_write(rel):
        pass
    with pytest.raises(OutsideCheckpointError):
        storage.delete_many(["keep", rel])  # all checked before the first delete
    assert backend.get("keep") == b"x"
    assert bytes(backend.fs.cat_file(backend.sibling("outside-file"))) == b"precious"
    assert storage.stats.put == storage.stats.delete == 0


def test_absolute_locations_outside_the_quarantine_are_refused(backend: Backend) -> None:
    backend.put("keep", b"x")
    storage = backend.storage()
    quarantine = backend.sibling("q")
    for location in (backend.sibling("elsewhere"), f"{quarantine}/../elsewhere", quarantine):
        with pytest.raises(OutsideCheckpointError):
            storage.write_bytes_absolute(location, b"x", within=quarantine)
        with pytest.raises(OutsideCheckpointError):
            storage.move_out("keep", location, within=quarantine)
        with pytest.raises(OutsideCheckpointError):
            storage.move_in(location, "keep", within=quarantine)
    assert backend.get("keep") == b"x"
    assert not backend.fs.exists(backend.sibling("elsewhere"))


def test_symbolic_links_out_of_the_root_are_refused(backend: Backend, tmp_path: Path) -> None:
    if not backend.is_local:
        pytest.skip(f"{backend.name} has no symbolic links")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "data").write_bytes(b"precious")
    root = Path(backend.root)
    (root / "state").mkdir()
    (root / "state" / "linked-dir").symlink_to(outside)
    (root / "state" / "linked-file").symlink_to(outside / "data")
    storage = backend.storage()
    listing = storage.list_all()
    assert set(listing.symlinks) == {"state/linked-dir", "state/linked-file"}
    assert [e.path for e in listing] == ["state/linked-file"]  # a directory link: not followed
    for rel in ("state/linked-dir/data", "state/linked-file"):
        with pytest.raises(OutsideCheckpointError, match="outside"):
            storage.delete_many([rel])
        with pytest.raises(OutsideCheckpointError):
            storage.write_bytes(rel, b"x")
    assert (outside / "data").read_bytes() == b"precious"


# -- errors ------------------------------------------------------------------------------------


def test_a_missing_file_is_one_line(backend: Backend) -> None:
    storage = backend.storage()
    with pytest.raises(StorageAccessError) as info:
        storage.read_bytes("offsets/9")
    assert one_line(info.value) == "offsets/9: listed but no longer exists"
    with pytest.raises(StorageAccessError) as info, storage.open_stream("offsets/9") as fh:
        fh.read()
    assert one_line(info.value).startswith("offsets/9: ")


def test_a_missing_bucket_or_container_is_one_line(backend: Backend) -> None:
    missing = Storage.from_url(backend.missing_url, backend.options)
    with pytest.raises(CheckpointNotFound) as info:
        missing.list_all()
    assert one_line(info.value).startswith(missing.url)
    with pytest.raises(CheckpointNotFound) as info:
        missing.read_text_absolute(f"{backend.missing_url}/manifest.json")
    one_line(info.value)
    if backend.name in ("local", "memory"):
        return  # no buckets there: a write creates the missing directories
    with pytest.raises(CkptError) as err:
        missing.write_bytes("x", b"x")
    assert one_line(err.value).startswith("x: ")


# -- request counts ----------------------------------------------------------------------------


def test_storages_sharing_stats_count_into_one(backend: Backend) -> None:
    backend.put("d/x", b"x")
    shared = StorageStats()
    first, second = backend.storage(shared), backend.storage(shared)
    first.list_all()
    second.read_bytes("d/x")
    assert shared.list >= 1 and shared.get == 1 and shared.files_read == 1
    assert first.stats is second.stats is shared


def test_a_child_storage_shares_the_client_and_counts_once(backend: Backend) -> None:
    backend.put("a/metadata", b"m")
    backend.put("b/metadata", b"n")
    parent = backend.storage()
    child = parent.child("b")
    assert child.url == f"{parent.url}/b" and child.stats is parent.stats
    assert [e.path for e in child.list_all()] == ["metadata"]
    assert child.read_bytes("metadata") == b"n"
    # Counted once: a second hook on the shared client would count each request twice.
    assert parent.stats.get == 1 and parent.stats.list == 1
    assert parent.child("").root == parent.root
