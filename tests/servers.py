"""Real object-store servers on loopback for the storage tests: moto (S3) and Azurite (ADLS).

Each starts once per test session on a free port and stops at the end. Where a server cannot
be started (no moto, no Azurite install), its tests are skipped with the reason, unless
``CKPT_REQUIRE_SERVERS=1`` (set by CI), where that is a failure.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
AZURITE_BIN = REPO / ".tools" / "node_modules" / ".bin" / "azurite-blob"
# Azurite's well-known development account (public, documented by Microsoft).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


def unavailable(reason: str) -> None:
    if os.environ.get("CKPT_REQUIRE_SERVERS") == "1":
        pytest.fail(f"{reason} (CKPT_REQUIRE_SERVERS=1)")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_port(port: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {seconds}s")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class _RequestLog(logging.Handler):
    """Counts the requests moto's HTTP server logs, by method: the server's own count."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[str] = []
        self.guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        # werkzeug: '%s - - [%s] "%s" %s %s' with the request line as the third argument.
        args = record.args if isinstance(record.args, tuple) else ()
        line = next((a for a in args if isinstance(a, str) and " HTTP/" in a), None)
        if line:
            line = _ANSI.sub("", line)  # werkzeug colours some status lines (206, 404...)
            with self.guard:
                self.requests.append(line)


class _Server:
    """What the tests do the same way on both servers: options, uploads."""

    scheme = ""
    created: set[str]

    @property
    def options(self) -> dict[str, Any]:
        raise NotImplementedError

    def fs(self) -> Any:
        raise NotImplementedError

    def cli_options(self) -> list[str]:
        return [arg for k, v in self.options.items() for arg in ("-S", f"{k}={v}")]

    def upload(self, local: Path, bucket: str, prefix: str) -> str:
        """Upload ``local`` under ``bucket``/``prefix`` (bucket or container made once)."""
        fs = self.fs()
        if bucket not in self.created:
            # moto's backends are per process: a bucket made through another server object of
            # this session already exists.
            with contextlib.suppress(FileExistsError):
                fs.mkdir(bucket)
            self.created.add(bucket)
        fs.put(str(local), f"{bucket}/{prefix}", recursive=True)
        return f"{self.scheme}://{bucket}/{prefix}"


@dataclass
class S3Server(_Server):
    endpoint: str
    log: _RequestLog
    created: set[str] = field(default_factory=set)
    scheme = "s3"

    @property
    def options(self) -> dict[str, Any]:
        return {"endpoint_url": self.endpoint}

    def fs(self) -> Any:
        import s3fs

        return s3fs.S3FileSystem(client_kwargs=self.options, skip_instance_cache=True)

    def mark(self) -> int:
        return len(self.log.requests)

    def requests_since(self, mark: int) -> Counter[str]:
        """Server-side request kinds since ``mark``: 'list', 'head', 'get', 'put', 'delete'."""
        kinds: Counter[str] = Counter()
        # werkzeug logs a request after answering it: let the last lines land.
        seen, deadline = -1, time.monotonic() + 5
        while len(self.log.requests) != seen and time.monotonic() < deadline:
            seen = len(self.log.requests)
            time.sleep(0.3)
        with self.log.guard:
            lines = self.log.requests[mark:]
        for line in lines:
            method, target = line.split(" ")[:2]
            query = target.partition("?")[2]
            if method == "GET" and ("list-type=" in query or "delimiter=" in query):
                kinds["list"] += 1
            elif method == "GET" and target.count("/") <= 1 and not query:
                kinds["list"] += 1  # ListObjects v1 on the bucket
            elif method == "POST" and "delete" in query:
                kinds["delete"] += 1
            else:
                kinds[
                    {"GET": "get", "HEAD": "head", "PUT": "put", "DELETE": "delete"}.get(
                        method, "other"
                    )
                ] += 1
        return kinds


@dataclass
class AzureServer(_Server):
    endpoint: str
    created: set[str] = field(default_factory=set)
    scheme = "abfs"

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};"
            f"AccountKey={AZURITE_KEY};BlobEndpoint={self.endpoint};"
        )

    @property
    def options(self) -> dict[str, Any]:
        return {"connection_string": self.connection_string}

    def fs(self) -> Any:
        import adlfs

        return adlfs.AzureBlobFileSystem(
            connection_string=self.connection_string, skip_instance_cache=True
        )


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        unavailable("moto[server] is not installed")
    # Fake credentials for the fake server; never a machine's real ones.
    saved = {k: os.environ.get(k) for k in _AWS_ENV}
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        os.environ.pop(k, None)
    log = _RequestLog()
    werkzeug = logging.getLogger("werkzeug")
    werkzeug.addHandler(log)
    werkzeug.setLevel(logging.INFO)
    werkzeug.propagate = False  # keep the request lines out of the test output
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    wait_for_port(port)
    try:
        yield S3Server(f"http://127.0.0.1:{port}", log)
    finally:
        server.stop()
        werkzeug.removeHandler(log)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_AWS_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
    "AWS_EC2_METADATA_DISABLED",
    "AWS_PROFILE",
    "AWS_SESSION_TOKEN",
)


def _azurite_command() -> list[str] | None:
    if AZURITE_BIN.exists():
        return [str(AZURITE_BIN)]
    found = shutil.which("azurite-blob")
    return [found] if found else None


@pytest.fixture(scope="session")
def azure_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzureServer]:
    pytest.importorskip("adlfs")
    command = _azurite_command()
    if command is None:
        unavailable("Azurite is not installed (./scripts/bootstrap installs it with npm)")
        raise AssertionError  # unreachable: unavailable() raises
    port = free_port()
    workdir = tmp_path_factory.mktemp("azurite")
    proc = subprocess.Popen(
        [
            *command,
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--inMemoryPersistence",
            "--skipApiVersionCheck",
            "--loose",
            "--silent",
        ],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        yield AzureServer(f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()  # reaped, or Python warns that it still runs


@pytest.fixture(
    params=[
        pytest.param("s3", marks=pytest.mark.s3),
        pytest.param("azure", marks=pytest.mark.azure),
    ]
)
def store(request: pytest.FixtureRequest) -> S3Server | AzureServer:
    """Each test that takes it runs once on the moto S3 server and once on Azurite."""
    server: S3Server | AzureServer = request.getfixturevalue(
        "s3_server" if request.param == "s3" else "azure_server"
    )
    return server
