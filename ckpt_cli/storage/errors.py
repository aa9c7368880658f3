"""Store failures as ckpt's one-line errors.

fsspec backends raise builtin exceptions (FileNotFoundError, PermissionError...), but the
clients under them raise their own (botocore, aiohttp, azure-core) and wrap each other:
:func:`classify_store_error` walks the exception chain and recognises them by class name, so
none of those libraries has to be installed for this module to work.
"""

from __future__ import annotations

from ckpt_cli.errors import CheckpointNotFound, CkptError, StorageAccessError

_CONNECT_ERRORS = {
    "EndpointConnectionError",
    "ConnectTimeoutError",
    "ClientConnectorError",
    "ServiceRequestError",
    "ConnectionRefusedError",
    "ServerTimeoutError",
}
# What to set, by store: one line each (the hint of a "no credentials" error).
S3_CREDENTIALS_HINT = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or give them with "
    "-S key=... -S secret=..."
)
AZURE_CREDENTIALS_HINT = (
    "give -S account_key=..., -S sas_token=... or -S connection_string=... (or set "
    "AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_SAS_TOKEN or AZURE_STORAGE_CONNECTION_STRING); "
    "-S anon=true for a public container; -S anon=false to use Azure's credential chain "
    "(managed identity, az login)"
)
GCS_CREDENTIALS_HINT = (
    "set GOOGLE_APPLICATION_CREDENTIALS to a service account key file, run 'gcloud auth "
    "application-default login', or give -S token=KEY_FILE; -S token=anon for a public bucket"
)
# The clients' "no credentials" errors, by class name, and the hint for each.
_CREDENTIAL_ERRORS = {
    "NoCredentialsError": S3_CREDENTIALS_HINT,  # botocore
    "PartialCredentialsError": S3_CREDENTIALS_HINT,
    "CredentialRetrievalError": S3_CREDENTIALS_HINT,
    "CredentialUnavailableError": AZURE_CREDENTIALS_HINT,  # azure-identity
    "AzureCredentialUnavailable": AZURE_CREDENTIALS_HINT,  # ckpt's AzureChainCredential
    "DefaultCredentialsError": GCS_CREDENTIALS_HINT,  # google-auth
}


def _exception_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain and len(chain) < 10:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    return chain


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text, at most 200 characters."""
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return line if len(line) <= 200 else line[:197] + "..."


def classify_store_error(exc: BaseException) -> tuple[str, str]:
    """What kind of failure an object-store client raised, and a one-line description.

    Kinds: ``credentials``, ``denied``, ``not_found``, ``connect``, ``other``.
    """
    return _classify(exc)[:2]


def _classify(exc: BaseException) -> tuple[str, str, BaseException]:
    """:func:`classify_store_error`, and the exception of the chain that told."""
    for e in _exception_chain(exc):
        names = {c.__name__ for c in type(e).__mro__}
        status = getattr(e, "status_code", None) or getattr(e, "status", None)
        if names & _CREDENTIAL_ERRORS.keys():
            return "credentials", first_line(e), e
        if "ClientAuthenticationError" in names or status in (401, 403):
            return "denied", first_line(e), e
        if isinstance(e, PermissionError):
            return "denied", first_line(e), e
        if "ResourceNotFoundError" in names or status == 404 or isinstance(e, FileNotFoundError):
            return "not_found", first_line(e), e
        if names & _CONNECT_ERRORS or isinstance(e, (ConnectionError, TimeoutError)):
            return "connect", first_line(e), e
    return "other", first_line(exc), exc


def store_error(where: str, action: str, exc: BaseException, endpoint: str = "") -> CkptError:
    """A one-line error for a failed ``action`` ('read', 'list', ...) on ``where``."""
    if isinstance(exc, CkptError):
        return exc
    kind, detail, told = _classify(exc)
    if kind == "credentials":
        name = next(c.__name__ for c in type(told).__mro__ if c.__name__ in _CREDENTIAL_ERRORS)
        return StorageAccessError(
            f"{where}: no credentials to {action} with ({detail})",
            hint=_CREDENTIAL_ERRORS[name],
        )
    if kind == "denied":
        return StorageAccessError(f"{where}: access denied while trying to {action} ({detail})")
    if kind == "not_found":
        return CheckpointNotFound(f"{where}: no such file, bucket or container ({detail})")
    if kind == "connect":
        at = f" {endpoint}" if endpoint else ""
        return StorageAccessError(
            f"{where}: could not connect to the store{at} to {action} ({detail})",
            hint="check the endpoint and the network; retries were bounded",
        )
    return StorageAccessError(f"{where}: cannot {action}: {detail}")


def read_error(rel: str, exc: BaseException) -> CkptError:
    """A failed read of a listed checkpoint file: gone since the listing, a directory,
    refused, or the store's own failure."""
    if not isinstance(exc, OSError) or classify_store_error(exc)[0] in ("connect", "credentials"):
        return store_error(rel, "read", exc)
    if isinstance(exc, FileNotFoundError):
        return StorageAccessError(
            f"{rel}: listed but no longer exists",
            hint="is a query or another tool changing the checkpoint right now?",
        )
    if isinstance(exc, IsADirectoryError):
        return StorageAccessError(f"{rel}: is a directory, expected a file")
    if isinstance(exc, PermissionError):
        return StorageAccessError(f"{rel}: permission denied")
    return StorageAccessError(f"{rel}: cannot read: {exc}")
