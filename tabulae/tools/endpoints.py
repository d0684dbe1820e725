"""Where the data tools connect: a connection string, an endpoint and a credential, or a table URL.

Every tool takes the same options, and defaults to the local development account
(``UseDevelopmentStorage=true``: ``http://127.0.0.1:10002/devstoreaccount1``), so that
``tabulae table list`` works against ``make run`` as it is:

* ``--connection-string CS`` (also read from ``AZURE_STORAGE_CONNECTION_STRING``, as the az CLI
  does): any connection string Microsoft's SDK accepts, Azure's or Tabulae's;
* ``--endpoint URL`` with ``--account-name``/``--account-key`` (Shared Key) or ``--sas TOKEN``.

``tabulae copy`` also takes a table *URL* with a SAS in its query string
(``https://acct.table.core.windows.net/people?sv=...``), the form the portal hands out. The SDK
builds the clients; a SAS becomes its ``AzureSasCredential``, so every request the tools send
through the SDK's pipeline carries it.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
from azure.data.tables import TableClient, TableServiceClient

from tabulae.tools.failures import EXIT_USAGE, Failure

DEV_CONNECTION = "UseDevelopmentStorage=true"
CONNECTION_ENV = "AZURE_STORAGE_CONNECTION_STRING"
INVALID = "InvalidConnectionString"
# Our own retries decide (with back-off and a count the user sees); the SDK's would hide them.
CLIENT_OPTIONS: dict[str, Any] = {"retry_total": 0, "connection_timeout": 20, "read_timeout": 120}


class EndpointError(Failure, ValueError):
    """Connection options that cannot work (together); the message says which, never a key."""

    def __init__(self, message: str, code: str = "InvalidArguments") -> None:
        super().__init__(code, message, EXIT_USAGE)


def check_connection_string(connection_string: str) -> TableServiceClient:
    """The service client of ``connection_string``, or :class:`EndpointError`
    (``InvalidConnectionString``) saying what is wrong with it: what the SDK cannot parse, and
    an account key that is not base64 (which the SDK finds only when it signs a request)."""
    try:
        client = TableServiceClient.from_connection_string(connection_string, **CLIENT_OPTIONS)
    except ValueError as exc:
        raise EndpointError(f"the connection string is not usable: {exc}", INVALID) from None
    for part in connection_string.split(";"):
        name, _, value = part.strip().partition("=")
        if name.lower() == "accountkey":
            _check_key(value, "the AccountKey of the connection string", INVALID)
    return client


def _check_key(key: str, what: str, code: str) -> None:
    try:
        base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError):
        raise EndpointError(f"{what} is not valid base64", code) from None


@dataclass(frozen=True, slots=True)
class Endpoint:
    """How to reach an account: a connection string, or an endpoint URL and a credential."""

    connection_string: str | None = None
    url: str | None = None
    account_name: str | None = None
    account_key: str | None = None
    sas: str | None = None

    def service(self) -> TableServiceClient:
        if self.url is None:
            return check_connection_string(self.connection_string or DEV_CONNECTION)
        return TableServiceClient(self.url, credential=self._credential(), **CLIENT_OPTIONS)

    def table(self, name: str) -> TableClient:
        return self.service().get_table_client(name)

    def _credential(self) -> AzureNamedKeyCredential | AzureSasCredential:
        if self.sas:
            return AzureSasCredential(self.sas.lstrip("?"))
        if self.account_name and self.account_key:
            _check_key(self.account_key, "--account-key", "InvalidArguments")
            return AzureNamedKeyCredential(self.account_name, self.account_key)
        raise EndpointError("--endpoint needs --account-name and --account-key, or --sas")

    def describe(self) -> str:
        """Where this is, for messages: the endpoint URL, never a key or a SAS."""
        try:
            client = self.service()
        except EndpointError:
            return "(invalid connection string)"
        return client.url.split("?", 1)[0]


def add_endpoint_arguments(parser: argparse.ArgumentParser, prefix: str = "", what: str = "") -> None:
    """The connection options; ``prefix`` (``source-``/``dest-``) names one side of a copy."""
    side = f" of the {what}" if what else ""
    parser.add_argument(
        f"--{prefix}connection-string",
        metavar="CS",
        help=f"connection string{side} (default: ${CONNECTION_ENV}, else the local development account)"
        if not prefix
        else f"connection string{side} (default: the one of --connection-string)",
    )
    parser.add_argument(f"--{prefix}endpoint", metavar="URL", help=f"table endpoint URL{side}")
    parser.add_argument(f"--{prefix}account-name", metavar="NAME", help=f"account name{side} (Shared Key)")
    parser.add_argument(f"--{prefix}account-key", metavar="KEY", help=f"account key{side} (Shared Key)")
    parser.add_argument(f"--{prefix}sas", metavar="TOKEN", help=f"shared access signature{side}")


def endpoint_from(args: argparse.Namespace, prefix: str = "", fallback: Endpoint | None = None) -> Endpoint:
    """The endpoint the options name; with none of them, ``fallback`` or the default."""
    key = prefix.replace("-", "_")
    url = getattr(args, f"{key}endpoint", None)
    connection = getattr(args, f"{key}connection_string", None)
    if url and connection:
        raise EndpointError(f"--{prefix}endpoint and --{prefix}connection-string exclude each other")
    if url:
        return Endpoint(
            url=url,
            account_name=getattr(args, f"{key}account_name", None),
            account_key=getattr(args, f"{key}account_key", None),
            sas=getattr(args, f"{key}sas", None),
        )
    if connection:
        return Endpoint(connection_string=connection)
    if fallback is not None:
        return fallback
    return Endpoint(connection_string=os.environ.get(CONNECTION_ENV) or DEV_CONNECTION)


def table_client(spec: str, endpoint: Endpoint) -> TableClient:
    """``spec`` is a table name on ``endpoint``, or a whole table URL (with a SAS in its query)."""
    if "://" not in spec:
        return endpoint.table(spec)
    parts = urlsplit(spec)
    segments = [s for s in parts.path.split("/") if s]
    if not segments:
        raise EndpointError(f"{parts.scheme}://{parts.netloc}{parts.path}: the URL names no table")
    account_url = f"{parts.scheme}://{parts.netloc}/" + "/".join(segments[:-1])
    if not parts.query:
        raise EndpointError(
            f"{parts.scheme}://{parts.netloc}{parts.path}: a table URL carries a SAS in its query; "
            "otherwise give the table's name and the account with --source-…/--dest-… options"
        )
    credential = AzureSasCredential(parts.query)
    service = TableServiceClient(account_url.rstrip("/"), credential=credential, **CLIENT_OPTIONS)
    return service.get_table_client(segments[-1])
