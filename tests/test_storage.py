from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ckpt_cli.errors import CheckpointNotFound, MissingExtraError, NotACheckpoint
from ckpt_cli.storage import Storage, redact_url
from tests.tree import write_tree


def test_local_listing_is_one_pass_with_sizes_and_mtimes(tmp_path: Path) -> None:
    write_tree(tmp_path, {"metadata": b"{}", "offsets/0": b"v1", "state/0/0/1.delta": b"abc"})
    storage = Storage.from_url(str(tmp_path))
    listing = storage.list_all()
    assert [(e.path, e.size) for e in listing] == [
        ("metadata", 2),
        ("offsets/0", 2),
        ("state/0/0/1.delta", 3),
    ]
    assert all(e.mtime is not None for e in listing)
    # One scandir per directory: root, offsets, state, state/0, state/0/0.
    assert storage.stats.list == 5


def test_file_url_equals_path(tmp_path: Path) -> None:
    write_tree(tmp_path, {"metadata": b"{}"})
    a = Storage.from_url(str(tmp_path)).list_all()
    b = Storage.from_url(f"file://{tmp_path}").list_all()
    assert [e.path for e in a] == [e.path for e in b]


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(CheckpointNotFound, match="no such file"):
        Storage.from_url(str(tmp_path / "nope")).list_all()


def test_file_instead_of_dir(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(NotACheckpoint, match="is a file"):
        Storage.from_url(str(tmp_path / "f")).list_all()


def test_memory_file_instead_of_dir() -> None:
    import fsspec

    fsspec.filesystem("memory").pipe_file("/afile", b"x")
    with pytest.raises(NotACheckpoint, match="is a file"):
        Storage.from_url("memory://afile").list_all()


def test_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gcsfs", None)  # as if not installed: import fails
    with pytest.raises(MissingExtraError) as info:
        Storage.from_url("gs://bucket/ckpt")
    assert "gs://" in info.value.message and info.value.hint


def test_s3a_is_served_as_s3() -> None:
    pytest.importorskip("s3fs")
    storage = Storage.from_url("s3a://bucket/prefix", {"anon": True})
    assert type(storage.fs).__name__ == "S3FileSystem"
    assert storage.url == "s3a://bucket/prefix"


def test_redaction() -> None:
    assert redact_url("s3://key:secret@bucket/p?x=1") == "s3://bucket/p"
    assert (
        redact_url("abfss://c@acct.dfs.core.windows.net/p?sig=SECRET")
        == "abfss://c@acct.dfs.core.windows.net/p"
    )
    assert redact_url("/data/ckpt") == "/data/ckpt"


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to drop the capability that bypasses permissions",
)
def test_permission_denied_is_one_line(tmp_path: Path) -> None:
    """A real EACCES: the CLI runs without CAP_DAC_OVERRIDE on a directory mode 000."""
    ckpt = tmp_path / "ckpt"
    write_tree(ckpt, {"metadata": b'{"id":"x"}', "offsets/0": b"v1\n{}\n-"})
    (ckpt / "offsets").chmod(0)
    try:
        proc = subprocess.run(
            [
                "setpriv",
                "--inh-caps=-dac_override,-dac_read_search",
                "--bounding-set=-dac_override,-dac_read_search",
                sys.executable,
                "-m",
                "ckpt_cli",
                "versions",
                str(ckpt),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        (ckpt / "offsets").chmod(0o755)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[0] == "error: offsets: permission denied while listing"
    assert "Traceback" not in proc.stderr


def test_streams_on_object_stores_read_ranges_with_listed_sizes() -> None:
    import fsspec

    from ckpt_cli.storage import HEADER_BLOCK, STREAM_BLOCK

    mem = fsspec.filesystem("memory")
    data = bytes(range(256)) * (((2 * STREAM_BLOCK) + 12345) // 256)
    mem.pipe_file("/rangetest/state/0/0/1.changelog", data)
    storage = Storage.from_url("memory://rangetest")
    storage.list_all()
    with storage.open_stream("state/0/0/1.changelog", header_only=True) as fh:
        assert fh.read(100) == data[:100]
    assert storage.stats.get == 1 and storage.stats.bytes_read == 100
    with storage.open_stream("state/0/0/1.changelog", header_only=True) as fh:
        head = fh.read(100) + fh.read(HEADER_BLOCK)  # past the first range: a second GET
    assert head == data[: HEADER_BLOCK + 100] and storage.stats.get == 3
    with storage.open_stream("state/0/0/1.changelog") as fh:
        chunks = []
        while chunk := fh.read(65536):
            chunks.append(chunk)
    assert b"".join(chunks) == data
    assert storage.stats.get == 3 + -(-len(data) // STREAM_BLOCK)
    mem.rm("/rangetest", recursive=True)


def test_random_access_reads_a_zip_by_ranges() -> None:
    import io
    import os
    import zipfile

    import fsspec

    from ckpt_cli.formats.rocksdb_zip import read_zip

    case = Path(__file__).resolve().parent.parent / "fixtures/checkpoints/spark4-rocksdb-agg"
    original = sorted((case / "checkpoint/state/0/0").glob("*.zip"))[0].read_bytes()
    grown = io.BytesIO(original)
    with zipfile.ZipFile(grown, "a", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("MANIFEST-big", os.urandom(2 << 20))
    mem = fsspec.filesystem("memory")
    mem.pipe_file("/ziptest/state/0/0/1.zip", grown.getvalue())
    storage = Storage.from_url("memory://ziptest")
    storage.list_all()
    with storage.open_random("state/0/0/1.zip") as fh:
        ranged = read_zip("1.zip", fh)
    assert ranged == read_zip("1.zip", grown.getvalue())
    assert storage.stats.get == 2 and storage.stats.bytes_read < 200_000
    mem.rm("/ziptest", recursive=True)
