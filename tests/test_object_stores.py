"""Every command on S3 (moto server) and ADLS (Azurite) gives what it gives on local disk,
with the requests counted on both sides: ckpt's own ``--stats`` and the server's log."""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.storage import Storage
from tests.conftest import CASES, CASES_DIR, run_cli
from tests.servers import AzureServer, S3Server

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from synthetic import build  # noqa: E402

pytestmark = pytest.mark.skipif(not CASES, reason="no fixtures")

# Representative cases: HDFS store with .crc sidecars, RocksDB with changelogs (v1), RocksDB
# checkpoint format v2 (lineage, uniqueIds), a join (four stores), a crashed run.
CASE_NAMES = [
    "spark4-hdfs-agg",
    "spark4-rocksdb-changelog",
    "spark4-rocksdb-v2",
    "spark4-join",
    "spark4-crash-rocksdb-v2",
]


_UNIQUE = iter(range(1_000_000))


def copy_case(name: str, tmp_path: Path) -> Path:
    """A local copy whose files are as new as the uploaded objects will be."""
    local = tmp_path / "ckpt"
    shutil.copytree(CASES_DIR / name / "checkpoint", local)
    for p in local.rglob("*"):
        if p.is_file():
            os.utime(p)
    return local


def upload(store: S3Server | AzureServer, local: Path) -> str:
    bucket = "ckpt-tests"
    return store.upload(local, bucket, f"{local.name}-{next(_UNIQUE)}-{time.time_ns()}")


def normalise(obj: Any, url: str, local: Path) -> Any:
    """The JSON of a command with the location, timings and request counts taken out."""
    text = json.dumps(obj, sort_keys=True).replace(url, "<ckpt>").replace(str(local), "<ckpt>")
    data = json.loads(text)

    def scrub(x: Any) -> Any:
        if isinstance(x, dict):
            return {
                k: scrub(v)
                for k, v in x.items()
                if k
                not in (
                    "stats",
                    "seconds",
                    "requests",
                    "delete_requests",
                    "manifest",
                    "mtime",
                    "modified",
                    # modification times: milliseconds locally, seconds on S3
                    "files_modified",
                    "files_modified_ms",
                    "written",
                    "written_ms",
                    # ages in words
                    "note",
                    "warnings",
                )
                and not k.endswith("age_seconds")
            }
        if isinstance(x, list):
            return [scrub(v) for v in x]
        return x

    return scrub(data)


def run_both(
    store: S3Server | AzureServer, local: Path, url: str, *args: str, at: str = ""
) -> tuple[Any, Any]:
    """Run a command on the local copy and on the uploaded one; both normalised."""
    here = run_cli(*args[:1], str(local) + at, *args[1:], "--json")
    there = run_cli(*args[:1], url + at, *args[1:], *store.cli_options(), "--json")
    assert there.exit_code == here.exit_code, (there.stderr, here.stderr)
    return normalise(here.json(), url, local), normalise(there.json(), url, local)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_read_commands_match_local(
    store: S3Server | AzureServer, name: str, tmp_path: Path
) -> None:
    local = copy_case(name, tmp_path)
    url = upload(store, local)
    mark = store.mark() if isinstance(store, S3Server) else 0
    for args in (
        ("versions",),
        ("validate",),
        ("validate", "--all-versions"),
        ("orphans", "--retain", "1", "--min-age", "0"),
    ):
        here, there = run_both(store, local, url, *args)
        assert there == here, args
    # inspect: one file of each kind the checkpoint has
    kinds: dict[str, str] = {}
    for p in sorted(local.rglob("*")):
        if p.is_file() and "_metadata" not in p.parts:
            kinds.setdefault(p.suffix or p.parent.name, p.relative_to(local).as_posix())
    for rel in kinds.values():
        here, there = run_both(store, local, url, "inspect", at="/" + rel)
        assert there == here, rel
    # replay: every store of every operator at the latest batch, rows identical
    expected = json.loads((CASES_DIR / name / "expected.json").read_text())
    for op in expected["operators"]:
        for store_name in op["stores"]:
            opts = ["--operator", str(op["id"]), "--store", store_name, "--format", "jsonl"]
            here_rows = run_cli("replay", str(local), *opts)
            there_rows = run_cli("replay", url, *opts, *store.cli_options())
            assert there_rows.exit_code == here_rows.exit_code, there_rows.stderr
            assert sorted(there_rows.stdout.splitlines()) == sorted(here_rows.stdout.splitlines())
    if isinstance(store, S3Server):  # not one HEAD in all of the above, says the server
        assert store.requests_since(mark)["head"] == 0


def remote_paths(store: S3Server | AzureServer, url: str) -> set[str]:
    storage = Storage.from_url(url, store.options)
    return {e.path for e in storage.list_all()}


def local_paths(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", ["spark4-hdfs-agg", "spark4-rocksdb-v2"])
def test_cleanup_apply_matches_local(
    store: S3Server | AzureServer, name: str, tmp_path: Path
) -> None:
    local = copy_case(name, tmp_path)
    url = upload(store, local)
    args = ("cleanup", "--retain", "1", "--min-age", "0", "--force", "--apply", "--yes")
    here, there = run_both(store, local, url, *args)
    assert there == here
    assert here["files"] > 0 and there["result"]["deleted"] == here["files"]
    assert remote_paths(store, url) == local_paths(local)
    # The cleaned checkpoint still validates there.
    result = run_cli("validate", url, *store.cli_options(), "--json")
    assert result.exit_code == 0, result.stdout


def test_repair_apply_and_undo_match_local(store: S3Server | AzureServer, tmp_path: Path) -> None:
    local = copy_case("spark4-hdfs-agg", tmp_path)
    n = max(int(p.name) for p in (local / "commits").iterdir() if p.name.isdigit())
    delta = local / f"state/0/1/{n + 1}.delta"
    delta.write_bytes(delta.read_bytes()[:-8])  # a truncated latest delta
    url = upload(store, local)
    before = remote_paths(store, url)
    # Just uploaded: every object is younger than --min-age.
    here, there = run_both(store, local, url, "repair", "--apply", "--yes", "--force")
    assert there == here and here["rollback_to"] == n - 1
    assert remote_paths(store, url) == local_paths(local)
    result = run_cli("validate", url, *store.cli_options(), "--json")
    assert result.exit_code == 0, result.stdout
    manifest = run_cli("repair", url, *store.cli_options(), "--json", "--apply", "--yes")
    assert manifest.json()["actions"] == []  # nothing left to repair
    undo_from = there_manifest(store, url)
    undo = run_cli("repair", url, "--undo", "--manifest", undo_from, *store.cli_options())
    assert undo.exit_code == 0, undo.stderr
    assert remote_paths(store, url) == before


def there_manifest(store: S3Server | AzureServer, url: str) -> str:
    """The one repair manifest in the quarantine beside ``url``."""
    fs = store.fs()
    scheme, path = url.split("://", 1)
    found = [p for p in fs.find(path + ".ckpt-quarantine") if p.endswith("manifest.json")]
    assert len(found) == 1, found
    return f"{scheme}://{found[0]}"


# -- request counts -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A synthetic HDFS checkpoint of more than 1,000 objects (8 partitions x 110 versions)."""
    root = tmp_path_factory.mktemp("big") / "ckpt"
    totals = build(root, partitions=8, versions=110, keys=400, crc=False)
    (root / ".complete").unlink()
    assert totals["files"] > 1000
    return root, totals["files"]


@pytest.mark.parametrize("command", [("versions",), ("validate",)])
@pytest.mark.s3
def test_s3_listing_is_one_paged_listing_without_heads(
    s3_server: S3Server, big_checkpoint: tuple[Path, int], command: tuple[str, ...]
) -> None:
    root, objects = big_checkpoint
    url = upload(s3_server, root)
    mark = s3_server.mark()
    result = run_cli(*command[:1], url, *command[1:], *s3_server.cli_options(), "--json", "--stats")
    assert result.exit_code == 0, result.stderr
    counted = result.json()["requests"]
    served = s3_server.requests_since(mark)
    assert counted["list"] == math.ceil(objects / 1000) == served["list"]
    assert counted["head"] == 0 == served["head"]
    assert counted["get"] == served["get"] and counted["get"] <= 20 + 8 * 12
    assert counted["put"] == counted["delete"] == 0 == served["put"] + served["delete"]


@pytest.mark.s3
def test_s3_cleanup_deletes_in_batches_of_1000(
    s3_server: S3Server, big_checkpoint: tuple[Path, int]
) -> None:
    root, _ = big_checkpoint
    url = upload(s3_server, root)
    plan = run_cli(
        "orphans", url, "--retain", "2", "--min-age", "0", *s3_server.cli_options(), "--json"
    )
    files = plan.json()["files"]
    assert files > 1000
    mark = s3_server.mark()
    result = run_cli(
        "cleanup",
        url,
        "--retain",
        "2",
        "--min-age",
        "0",
        "--force",
        "--apply",
        "--yes",
        *s3_server.cli_options(),
        "--json",
        "--stats",
    )
    assert result.exit_code == 0, result.stderr
    counted = result.json()["requests"]
    served = s3_server.requests_since(mark)
    assert served["delete"] == counted["delete"]
    # Exactly one multi-object delete per 1,000 files, plus the one that releases the lock.
    assert counted["delete"] == math.ceil(files / 1000) + 1
    assert counted["head"] == served["head"] == 0


@pytest.mark.s3
def test_stats_in_human_output(s3_server: S3Server) -> None:
    url = upload(s3_server, CASES_DIR / "spark4-hdfs-agg" / "checkpoint")
    result = run_cli("versions", url, *s3_server.cli_options(), "--stats")
    assert result.exit_code == 0, result.stderr
    assert "requests: 1 list, 0 head, " in result.stderr


def test_local_stats_count_directories_and_files(tmp_path: Path) -> None:
    result = run_cli("versions", str(CASES_DIR / "spark4-hdfs-agg" / "checkpoint"), "--json")
    assert "requests" not in result.json()
    result = run_cli(
        "versions", str(CASES_DIR / "spark4-hdfs-agg" / "checkpoint"), "--json", "--stats"
    )
    counted = result.json()["requests"]
    assert counted["list"] > 1 and counted["get"] >= 1 and counted["head"] == 0


# -- bad input: one line, exit 2, nothing changed -----------------------------------------------


def one_line_error(result: Any) -> str:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert lines and lines[0].startswith("error: "), result.stderr
    assert len(lines) <= 2 and (len(lines) == 1 or lines[1].startswith("hint: ")), lines
    assert "Traceback" not in result.stderr + result.stdout
    line: str = lines[0]
    return line


@pytest.mark.s3
def test_s3_wrong_bucket(s3_server: S3Server) -> None:
    result = run_cli("validate", "s3://no-such-bucket-here/ckpt", *s3_server.cli_options())
    line = one_line_error(result)
    assert "no-such-bucket-here" in line and "bucket does not exist" in line


@pytest.mark.s3
def test_s3_prefix_without_checkpoint(s3_server: S3Server) -> None:
    upload(s3_server, CASES_DIR / "spark4-hdfs-agg" / "checkpoint" / "offsets")
    result = run_cli("versions", "s3://ckpt-tests/nothing-under-here", *s3_server.cli_options())
    line = one_line_error(result)
    assert "s3://ckpt-tests/nothing-under-here" in line and "no such" in line


@pytest.mark.s3
def test_s3_prefix_with_files_but_no_checkpoint(s3_server: S3Server) -> None:
    url = upload(s3_server, CASES_DIR / "spark4-hdfs-agg" / "checkpoint" / "state" / "0" / "0")
    result = run_cli("validate", url, *s3_server.cli_options())
    assert "not a spark checkpoint" in one_line_error(result).lower()


@pytest.mark.s3
def test_s3_endpoint_that_does_not_answer(s3_server: S3Server) -> None:
    from tests.servers import free_port

    endpoint = f"http://127.0.0.1:{free_port()}"
    start = time.monotonic()
    result = run_cli("versions", "s3://bucket/ckpt", "-S", f"endpoint_url={endpoint}")
    took = time.monotonic() - start
    line = one_line_error(result)
    assert endpoint in line and "could not connect" in line.lower()
    assert took < 30, took  # bounded retries


@pytest.mark.s3
def test_s3_endpoint_that_accepts_but_never_answers(s3_server: S3Server) -> None:
    import socket

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # the kernel completes handshakes; nobody ever reads or answers
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        start = time.monotonic()
        result = run_cli(
            "versions",
            "s3://bucket/ckpt",
            "-S",
            f"endpoint_url={endpoint}",
            "-S",
            "read_timeout=1",
            "-S",
            "max_attempts=2",
        )
        took = time.monotonic() - start
    line = one_line_error(result)
    assert endpoint in line, line
    assert took < 20, took  # two attempts of one second, plus s3fs's own short retries


@pytest.mark.s3
def test_s3_missing_credentials(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    result = run_cli("versions", "s3://ckpt-tests/x", *s3_server.cli_options())
    assert "credentials" in one_line_error(result).lower()


@pytest.mark.azure
def test_azure_wrong_key_is_access_denied(azure_server: AzureServer) -> None:
    url = upload(azure_server, CASES_DIR / "spark4-hdfs-agg" / "checkpoint")
    wrong = "A" * 86 + "=="
    conn = azure_server.connection_string.replace(
        azure_server.connection_string.split("AccountKey=")[1].split(";")[0], wrong
    )
    result = run_cli("cleanup", url, "-S", f"connection_string={conn}", "--apply", "--yes")
    line = one_line_error(result)
    assert "denied" in line.lower() or "authori" in line.lower(), line
    assert wrong not in result.stderr + result.stdout  # secrets never printed
    assert remote_paths(azure_server, url) == local_paths(
        CASES_DIR / "spark4-hdfs-agg" / "checkpoint"
    )


@pytest.mark.azure
def test_azure_wrong_container(azure_server: AzureServer) -> None:
    result = run_cli("versions", "abfs://no-such-container/ckpt", *azure_server.cli_options())
    assert "no-such-container" in one_line_error(result)


@pytest.mark.azure
def test_secrets_stay_hidden_with_debug(azure_server: AzureServer) -> None:
    conn = azure_server.connection_string
    key = conn.split("AccountKey=")[1].split(";")[0]
    result = run_cli(
        "--debug", "versions", "abfs://no-such-container/ckpt", "-S", f"connection_string={conn}"
    )
    assert result.exit_code != 0
    assert key not in result.stdout + result.stderr


@pytest.mark.s3
def test_s3_storage_survives_pickling_for_workers(s3_server: S3Server) -> None:
    """Worker processes and Spark tasks get a pickled Storage: same settings, own counts."""
    import pickle

    url = upload(s3_server, CASES_DIR / "spark4-hdfs-agg" / "checkpoint")
    storage = Storage.from_url(url, {**s3_server.options, "retries": 1})
    storage.list_all()
    copy = pickle.loads(pickle.dumps(storage))
    assert copy.fs.retries == 1 == storage.fs.retries
    assert copy.read_bytes("metadata") == storage.read_bytes("metadata")
    assert copy.stats.get == 1 and copy.stats.list == 0  # counted by its own client hook


@pytest.mark.s3
def test_s3_large_zip_metadata_read_by_ranges(s3_server: S3Server, tmp_path: Path) -> None:
    """A zip grown past a megabyte (a big MANIFEST inside) is not downloaded to find the
    SSTs it names: its central directory and metadata entry are read by range."""
    import zipfile

    local = copy_case("spark4-rocksdb-agg", tmp_path)
    zips = sorted(local.glob("state/0/0/*.zip"), key=lambda p: int(p.stem))
    big = zips[-1]
    with zipfile.ZipFile(big, "a", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("MANIFEST-999999", os.urandom(3 << 20))
    assert big.stat().st_size > 3 << 20
    (big.parent / f".{big.name}.crc").unlink()  # as on S3, where Hadoop writes no .crc
    url = upload(s3_server, local)
    args = ("orphans", "--retain", "1", "--min-age", "0")
    here, there = run_both(s3_server, local, url, *args)
    assert there == here
    result = run_cli(*args[:1], url, *args[1:], *s3_server.cli_options(), "--json", "--stats")
    assert result.json()["requests"]["bytes_read"] < 1 << 20  # not the 3 MB zip
    here, there = run_both(s3_server, local, url, "validate")
    assert there == here
    result = run_cli("validate", url, *s3_server.cli_options(), "--json", "--stats")
    assert result.json()["requests"]["bytes_read"] < 1 << 20


@pytest.mark.s3
def test_s3_v2_lineage_heads_are_fetched_by_range(s3_server: S3Server, tmp_path: Path) -> None:
    """Checkpoint format v2: validate reads each partition's changelog lineage line, and on
    S3 only its first range, whatever the changelog's size."""
    local = copy_case("spark4-rocksdb-v2", tmp_path)
    url = upload(s3_server, local)
    here, there = run_both(s3_server, local, url, "validate", "--all-versions")
    assert there == here
    storage = Storage.from_url(url, s3_server.options)
    storage.list_all()
    changelogs = [e.path for e in storage.list_all() if e.path.endswith(".changelog")]
    assert changelogs
    storage.prefetch(changelogs, heads=True)
    assert storage.stats.get == len(changelogs)
    for rel in changelogs:
        with storage.open_stream(rel, header_only=True) as fh:
            head = fh.read(16)
        assert head == storage.read_bytes(rel, 0, 16)
    assert storage.stats.get == 2 * len(changelogs)  # heads served from the prefetch


@pytest.mark.azure
def test_azure_versions_is_one_listing_without_heads(azure_server: AzureServer) -> None:
    url = upload(azure_server, CASES_DIR / "spark4-rocksdb-v2" / "checkpoint")
    result = run_cli("validate", url, *azure_server.cli_options(), "--json", "--stats")
    assert result.exit_code == 0, result.stderr
    counted = result.json()["requests"]
    assert counted["list"] == 1 and counted["head"] == 0  # < 5,000 blobs: one page
    assert counted["get"] >= 3 and counted["put"] == counted["delete"] == 0
