"""ADLS and GCS without credentials: one line naming the settings, at once, as on S3 (no
credential chain, no metadata server, no retries, no SDK messages on stderr)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ckpt_cli.errors import StorageAccessError
from ckpt_cli.storage import credentials
from ckpt_cli.storage.credentials import AzureChainCredential, resolve_credentials
from ckpt_cli.storage.errors import AZURE_CREDENTIALS_HINT, GCS_CREDENTIALS_HINT
from tests.conftest import CASES_DIR, REPO, run_cli
from tests.servers import AZURITE_ACCOUNT, AzureServer, free_port

# Every variable the Azure and Google libraries read credentials (or where to look) from.
CLOUD_ENV = (
    *credentials._AZURE_ENV,
    *credentials._AZURE_IDENTITY_ENV,
    "AZURE_STORAGE_ANON",
    "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_TENANT_ID",
    "AZURE_CLIENT_SECRET",
    "AZURE_CLIENT_CERTIFICATE_PATH",
    "AZURE_USERNAME",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "CLOUDSDK_CONFIG",
    "STORAGE_EMULATOR_HOST",
    "GCE_METADATA_HOST",
    "GCE_METADATA_ROOT",
    "GCE_METADATA_IP",
    "K_SERVICE",
    "CLOUD_RUN_JOB",
    "GAE_APPLICATION",
    "NO_GCE_CHECK",
)
AZURE_SETTINGS = (
    "account_key=",
    "sas_token=",
    "connection_string=",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_CONNECTION_STRING",
    "anon=true",
)
GCS_SETTINGS = ("GOOGLE_APPLICATION_CREDENTIALS", "token=", "token=anon")


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A machine with no cloud credentials: none of the variables, an empty home (no gcloud
    or gcsfs files), not a Google VM. Returns the home."""
    for name in CLOUD_ENV:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(credentials, "_GCE_PRODUCT_NAME", tmp_path / "no-such-dmi-file")
    return home


def bare_environ(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a ``python -m ckpt_cli`` run on such a machine: no cloud variables,
    an empty home, and a PATH where no az, pwsh or azd is found."""
    env = {k: v for k, v in os.environ.items() if k not in CLOUD_ENV}
    env.update(HOME=str(home), PATH=str(home), PYTHONPATH=str(REPO), **extra)
    return env


def error_and_hint(stderr: str, exit_code: int) -> tuple[str, str]:
    """stderr is exactly one error line and one hint line: nothing logged by the libraries."""
    assert exit_code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("error: ") and lines[1].startswith("hint: "), lines
    return lines[0], lines[1]


def azurite_options(server: AzureServer) -> list[str]:
    """The account on Azurite, and no key."""
    host = server.endpoint.removeprefix("http://")
    return ["-S", f"account_name={AZURITE_ACCOUNT}", "-S", f"account_host={host}"]


# -- ADLS ----------------------------------------------------------------------------------


@pytest.mark.azure
def test_adls_without_credentials_refuses_at_once(
    azure_server: AzureServer, no_credentials: Path
) -> None:
    # Before: DefaultAzureCredential ran for each request and each of the storage SDK's
    # retries (15, 18, 24 s apart): 169 s and 97 lines.
    start = time.monotonic()
    result = run_cli("versions", "abfs://ckpt-tests/q1", *azurite_options(azure_server))
    took = time.monotonic() - start
    line, hint = error_and_hint(result.stderr, result.exit_code)
    assert line == "error: abfs://ckpt-tests/q1: no Azure credentials configured"
    assert all(setting in hint for setting in AZURE_SETTINGS), hint
    assert took < 10, took


def test_adls_url_of_a_real_account_without_credentials(no_credentials: Path) -> None:
    # What users write; refused before any request (this machine has no route to Azure).
    url = "abfss://container@account.dfs.core.windows.net/ckpt/q1"
    start = time.monotonic()
    result = run_cli("validate", url)
    took = time.monotonic() - start
    line, hint = error_and_hint(result.stderr, result.exit_code)
    assert line == f"error: {url}: no Azure credentials configured"
    assert all(setting in hint for setting in AZURE_SETTINGS), hint
    assert took < 10, took


@pytest.mark.azure
def test_adls_credential_chain_that_finds_nothing_is_one_line(
    azure_server: AzureServer, no_credentials: Path
) -> None:
    """-S anon=false asks for Azure's credential chain: it runs once, its failure is not
    retried, and the SDK's messages stay off stderr. A real process: in-process, pytest's
    log capture would hide what Python prints for unconfigured logging."""
    # The chain's developer tools only (none is installed on this PATH): no request to the
    # IMDS address leaves the machine.
    env = bare_environ(no_credentials, AZURE_TOKEN_CREDENTIALS="dev")
    args = ["versions", "abfs://ckpt-tests/q1", *azurite_options(azure_server), "-S", "anon=false"]
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ckpt_cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - start
    line, hint = error_and_hint(done.stderr, done.returncode)
    assert "abfs://ckpt-tests/q1: no credentials to list with (DefaultAzureCredential" in line
    assert hint == f"hint: {AZURE_CREDENTIALS_HINT}"
    assert took < 15, took  # before: 169 s, the failed token request retried per call


@pytest.mark.azure
def test_adls_credentials_from_the_environment(
    azure_server: AzureServer, no_credentials: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A variable adlfs reads counts as configured: nothing refused, the checkpoint is read.
    local = CASES_DIR / "spark4-hdfs-agg" / "checkpoint"
    url = azure_server.upload(local, "ckpt-tests", f"from-env-{time.time_ns()}")
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azure_server.connection_string)
    result = run_cli("versions", url, "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["status"] == "ok"


NOTHING: dict[str, str] = {}


@pytest.mark.parametrize(
    ("options", "environ", "decision"),
    [
        ({}, NOTHING, "refused"),
        ({"account_name": "acct"}, NOTHING, "refused"),  # an account is no credential
        ({"account_key": "k"}, NOTHING, "as given"),
        ({"sas_token": "sv=1&sig=x"}, NOTHING, "as given"),
        ({"connection_string": "AccountName=a;AccountKey=k"}, NOTHING, "as given"),
        ({"client_id": "id", "client_secret": "s", "tenant_id": "t"}, NOTHING, "as given"),
        ({"anon": True}, NOTHING, "as given"),
        ({}, {"AZURE_STORAGE_ACCOUNT_KEY": "k"}, "as given"),
        ({}, {"AZURE_STORAGE_SAS_TOKEN": "sv=1"}, "as given"),
        ({}, {"AZURE_STORAGE_CONNECTION_STRING": "AccountName=a"}, "as given"),
        ({}, {"AZURE_STORAGE_ANON": "true"}, "as given"),
        ({}, {"AZURE_STORAGE_ACCOUNT_KEY": " "}, "refused"),  # blank is not set
        ({"anon": False}, NOTHING, "chain"),
        ({}, {"AZURE_STORAGE_ANON": "false"}, "chain"),
        ({}, {"AZURE_CLIENT_ID": "id", "AZURE_TENANT_ID": "t"}, "chain"),
        ({}, {"IDENTITY_ENDPOINT": "http://localhost:42356/msi/token"}, "chain"),
        ({}, {"AZURE_TOKEN_CREDENTIALS": "ManagedIdentityCredential"}, "chain"),
    ],
)
def test_adls_decisions(options: dict[str, Any], environ: Mapping[str, str], decision: str) -> None:
    url = "abfs://c@acct.dfs.core.windows.net/q1"
    if decision == "refused":
        with pytest.raises(StorageAccessError, match="no Azure credentials configured"):
            resolve_credentials("abfs", url, options, environ)
        return
    resolved = resolve_credentials("abfs", url, options, environ)
    if decision == "as given":
        assert resolved == options
    else:
        assert isinstance(resolved.pop("credential"), AzureChainCredential)
        assert resolved == options


def test_adls_chain_arguments_reach_the_chain_and_survive_pickling() -> None:
    # -o exclude_..._credential=true and the like are DefaultAzureCredential's arguments.
    options = {"anon": False, "exclude_managed_identity_credential": True, "account_name": "a"}
    chain = resolve_credentials("abfs", "abfs://c/q1", options, NOTHING)["credential"]
    assert chain._arguments == {"exclude_managed_identity_credential": True}
    again = pickle.loads(pickle.dumps(chain))  # to worker processes and Spark tasks
    assert isinstance(again, AzureChainCredential) and again is not chain
    assert again._arguments == chain._arguments and again._failure is None


# -- GCS -----------------------------------------------------------------------------------


def test_gcs_without_credentials_refuses_at_once(no_credentials: Path) -> None:
    pytest.importorskip("gcsfs")
    # Before: google-auth probed the metadata server, gcsfs went anonymous and retried the
    # unreachable endpoint: 50 s, 55 lines.
    start = time.monotonic()
    result = run_cli("versions", "gs://bucket/ckpt/q1")
    took = time.monotonic() - start
    line, hint = error_and_hint(result.stderr, result.exit_code)
    assert line == "error: gs://bucket/ckpt/q1: no Google Cloud credentials configured"
    assert all(setting in hint for setting in GCS_SETTINGS), hint
    assert took < 10, took


def test_gcs_key_file_that_is_not_there(
    no_credentials: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("gcsfs")
    missing = no_credentials / "key.json"
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(missing))
    start = time.monotonic()
    result = run_cli("versions", "gs://bucket/ckpt/q1")
    took = time.monotonic() - start
    line, hint = error_and_hint(result.stderr, result.exit_code)
    assert "gs://bucket/ckpt/q1: no credentials" in line and str(missing) in line, line
    assert hint == f"hint: {GCS_CREDENTIALS_HINT}"
    assert took < 10, took


def test_gcs_metadata_server_unreachable(no_credentials: Path) -> None:
    """A metadata server is named but nothing answers there: google-auth's probe gives up
    after its attempts, and that is one line. A real process: google-auth reads these
    variables when it is imported."""
    pytest.importorskip("gcsfs")
    nowhere = f"127.0.0.1:{free_port()}"  # nothing listens
    env = bare_environ(no_credentials, GCE_METADATA_HOST=nowhere, GCE_METADATA_IP=nowhere)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ckpt_cli", "versions", "gs://bucket/ckpt/q1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - start
    line, hint = error_and_hint(done.stderr, done.returncode)
    assert "gs://bucket/ckpt/q1: no credentials" in line, line
    assert hint == f"hint: {GCS_CREDENTIALS_HINT}"
    assert took < 30, took  # three refused connections with google-auth's backoff: ~4 s


@pytest.mark.parametrize(
    ("options", "environ", "token"),
    [
        ({"token": "anon"}, NOTHING, "anon"),
        ({"token": "/keys/sa.json"}, NOTHING, "/keys/sa.json"),
        ({}, {"GOOGLE_APPLICATION_CREDENTIALS": "/keys/sa.json"}, "google_default"),
        ({}, {"GCE_METADATA_HOST": "metadata.internal"}, "google_default"),
        ({}, {"K_SERVICE": "svc"}, "google_default"),  # Cloud Run
        ({"endpoint_url": "http://127.0.0.1:4443"}, NOTHING, "anon"),  # an emulator
        ({}, {"STORAGE_EMULATOR_HOST": "localhost:4443"}, "anon"),
        ({}, NOTHING, None),
    ],
)
def test_gcs_decisions(
    options: dict[str, Any], environ: Mapping[str, str], token: str | None, no_credentials: Path
) -> None:
    if token is None:
        with pytest.raises(StorageAccessError, match="no Google Cloud credentials configured"):
            resolve_credentials("gs", "gs://b/q1", options, environ)
        return
    assert resolve_credentials("gs", "gs://b/q1", options, environ)["token"] == token


def test_gcs_gcloud_login_counts(no_credentials: Path) -> None:
    adc = no_credentials / ".config" / "gcloud" / "application_default_credentials.json"
    adc.parent.mkdir(parents=True)
    adc.write_text("{}")
    assert resolve_credentials("gs", "gs://b/q1", {}, NOTHING)["token"] == "google_default"
