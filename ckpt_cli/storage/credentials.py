"""Which credentials an object store is opened with, decided before its client is made.

Left to themselves, adlfs and gcsfs go looking when nothing is configured: adlfs builds an
Azure ``DefaultAzureCredential`` (environment, workload identity, the IMDS metadata endpoint
with five retries, developer tools) and asks it again for each request, retries included
(169 s and 97 lines of Azure SDK messages before one error); gcsfs probes the GCE metadata
server, then quietly goes anonymous. ckpt does what it does on S3 instead: when no credential
is configured, it refuses at once, in one line naming the settings to give. The Azure chain
is used when asked for (``anon=false``, or the variables of Azure's identity library), and
then asked once.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ckpt_cli.errors import StorageAccessError
from ckpt_cli.storage.errors import AZURE_CREDENTIALS_HINT, GCS_CREDENTIALS_HINT, first_line

# Storage options that give adlfs a credential, or say to go without one (anon).
_AZURE_OPTIONS = ("account_key", "sas_token", "connection_string", "credential", "client_id")
# The variables adlfs reads for the same.
_AZURE_ENV = (
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_CLIENT_ID",
)
# Variables of azure-identity's own sources (a service principal, workload identity, the
# managed identity of App Service, Functions or Arc, a chosen credential): whoever sets them
# means the credential chain to run.
_AZURE_IDENTITY_ENV = (
    "AZURE_CLIENT_ID",
    "AZURE_FEDERATED_TOKEN_FILE",
    "IDENTITY_ENDPOINT",
    "MSI_ENDPOINT",
    "AZURE_TOKEN_CREDENTIALS",
)
# DefaultAzureCredential's keyword arguments, which adlfs passes on from the storage options.
_CHAIN_ARGUMENTS = (
    "authority",
    "managed_identity_client_id",
    "workload_identity_client_id",
    "workload_identity_tenant_id",
    "process_timeout",
    "shared_cache_username",
    "shared_cache_tenant_id",
    "additionally_allowed_tenants",
    "require_envvar",
)


def _set(environ: Mapping[str, str], name: str) -> bool:
    return bool(environ.get(name, "").strip())


def resolve_credentials(
    scheme: str,
    url: str,
    options: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``options`` for opening ``url`` (shown in messages as is), with what ckpt decided
    about credentials; raises StorageAccessError, without any request, when the store needs
    a credential and none is configured. Stores other than ADLS and GCS pass through."""
    env = os.environ if environ is None else environ
    if scheme == "abfs":
        return _azure(url, dict(options), env)
    if scheme in ("gs", "gcs"):
        return _gcs(url, dict(options), env)
    return dict(options)


# -- ADLS ---------------------------------------------------------------------------------------


def _azure(url: str, options: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    anon = options.get("anon")
    if anon is True or any(options.get(k) is not None for k in _AZURE_OPTIONS):
        return options  # a credential of its own, or deliberately none
    if any(_set(env, name) for name in _AZURE_ENV):
        return options
    env_anon = env.get("AZURE_STORAGE_ANON", "").strip().lower()
    if env_anon and env_anon not in ("false", "0", "f"):
        return options  # adlfs goes anonymous
    wants_chain = anon is False or bool(env_anon) or any(_set(env, n) for n in _AZURE_IDENTITY_ENV)
    if not wants_chain:
        raise StorageAccessError(
            f"{url}: no Azure credentials configured", hint=AZURE_CREDENTIALS_HINT
        )
    chain = {k: options[k] for k in options if k in _CHAIN_ARGUMENTS or k.startswith("exclude_")}
    options["credential"] = AzureChainCredential(chain)
    return options


class AzureCredentialUnavailable(Exception):
    """The Azure credential chain found nothing. Not an ``AzureError`` on purpose: the
    storage SDK's retry policy retries every ``AzureError`` (3 times, 15, 18 and 24 s
    apart, for each of adlfs's calls), a failed token request included."""


class AzureChainCredential:
    """Azure's ``DefaultAzureCredential`` (async, as adlfs's client takes it), asked once.

    The client asks its credential for a token on every request: a chain that finds nothing
    would run again for each (with the IMDS endpoint's own retries each time). After the
    first failure this one fails at once with the same message, and its failure is not
    retried (:class:`AzureCredentialUnavailable`). Pickled (to worker processes, Spark
    tasks) as its arguments, so each process has its own.
    """

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        from azure.identity.aio import DefaultAzureCredential

        self._arguments = dict(arguments or {})
        self._chain = DefaultAzureCredential(**self._arguments)
        self._failure: str | None = None

    async def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.exceptions import ClientAuthenticationError

        if self._failure is not None:
            raise AzureCredentialUnavailable(self._failure)
        try:
            return await self._chain.get_token(*scopes, **kwargs)
        except ClientAuthenticationError as exc:
            self._failure = first_line(exc)
            raise AzureCredentialUnavailable(self._failure) from exc

    async def close(self) -> None:
        await self._chain.close()

    async def __aenter__(self) -> AzureChainCredential:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._arguments,))


# -- GCS ----------------------------------------------------------------------------------------


def _gcs(url: str, options: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    if options.get("token") is not None:
        return options  # a key file, a token, "anon", "google_default"...
    if _set(env, "GOOGLE_APPLICATION_CREDENTIALS") or _gcloud_credentials(env).is_file():
        # google-auth's own lookup, alone: a key file that is not there says so, instead of
        # gcsfs trying the metadata server and then going anonymous.
        options["token"] = "google_default"
        return options
    if _on_google(env):
        options["token"] = "google_default"  # the metadata server's service account
        return options
    if (Path.home() / ".gcs_tokens").is_file():
        return options  # gcsfs's own cache of browser logins: its lookup finds it
    if options.get("endpoint_url") or _set(env, "STORAGE_EMULATOR_HOST"):
        # An emulator (or another endpoint): Google credentials are not sent to it unasked.
        options["token"] = "anon"
        return options
    raise StorageAccessError(
        f"{url}: no Google Cloud credentials configured", hint=GCS_CREDENTIALS_HINT
    )


def _gcloud_credentials(env: Mapping[str, str]) -> Path:
    """Where ``gcloud auth application-default login`` leaves its credentials."""
    if _set(env, "CLOUDSDK_CONFIG"):
        config = Path(env["CLOUDSDK_CONFIG"])
    elif sys.platform == "win32":
        config = Path(env.get("APPDATA", "")) / "gcloud"
    else:
        config = Path.home() / ".config" / "gcloud"
    return config / "application_default_credentials.json"


_GCE_PRODUCT_NAME = Path("/sys/class/dmi/id/product_name")


def _on_google(env: Mapping[str, str]) -> bool:
    """Whether a metadata server should be there: a Google VM (what google-auth reads too,
    without its network probe), Cloud Run, Functions, App Engine, or one named by hand."""
    markers = ("GCE_METADATA_HOST", "GCE_METADATA_ROOT", "GCE_METADATA_IP", "K_SERVICE")
    if any(_set(env, name) for name in (*markers, "CLOUD_RUN_JOB", "GAE_APPLICATION")):
        return True
    try:
        return _GCE_PRODUCT_NAME.read_text().strip().startswith("Google")
    except OSError:
        return False
