"""Loaded with ``-p tq_plugin`` after the blob harness's ``harness_plugin``: what the table and
queue tests need besides. Their accounts are the development account; a host-style name on
the default HTTPS port (``devstoreaccount1.table.core.windows.net``, as the table tests build
their URLs) reaches the local server's port for that service; and ``DefaultAzureCredential``,
which the table tests use in live mode for the pipeline's test principal, gives tokens that
``tabulae serve --oauth basic`` takes."""

import os
import socket

KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
for name, value in {
    "TABLES_STORAGE_ACCOUNT_NAME": "devstoreaccount1",
    "TABLES_PRIMARY_STORAGE_ACCOUNT_KEY": KEY,
}.items():
    os.environ.setdefault(name, value)

#: service (the host's second label) -> the local port, from run.py.
PORTS = {
    service: int(os.environ[f"SDK_TESTS_{service.upper()}_PORT"])
    for service in ("table", "queue", "blob")
    if f"SDK_TESTS_{service.upper()}_PORT" in os.environ
}
_resolve = socket.getaddrinfo


def _getaddrinfo(host, port, *args, **kwargs):
    if isinstance(host, str) and host.endswith(".core.windows.net") and port in (443, "443", "https"):
        labels = host.split(".")
        if len(labels) > 1 and labels[1] in PORTS:
            port = PORTS[labels[1]]
    return _resolve(host, port, *args, **kwargs)


socket.getaddrinfo = _getaddrinfo


def _live_credentials():
    """The pipeline's principal signs in through the environment or the Azure CLI: a
    ``DefaultAzureCredential`` told to skip both has no token (``test_error_handling``)."""
    import azure.identity
    import azure.identity.aio
    from devtools_testutils.fake_credentials import LiveTokenCredential
    from devtools_testutils.fake_credentials_async import AsyncLiveTokenCredential

    def unavailable(kwargs):
        return kwargs.get("exclude_environment_credential") and kwargs.get("exclude_cli_credential")

    class DefaultAzureCredential(LiveTokenCredential):
        def __init__(self, *args, **kwargs):
            self.unavailable = unavailable(kwargs)

        def get_token(self, *scopes, **kwargs):
            if self.unavailable:
                raise azure.identity.CredentialUnavailableError("no credential")
            return super().get_token(*scopes, **kwargs)

        def get_token_info(self, *scopes, options=None):
            if self.unavailable:
                raise azure.identity.CredentialUnavailableError("no credential")
            return super().get_token_info(*scopes, options=options)

    class AsyncDefaultAzureCredential(AsyncLiveTokenCredential):
        def __init__(self, *args, **kwargs):
            self.unavailable = unavailable(kwargs)

        async def get_token(self, *scopes, **kwargs):
            if self.unavailable:
                raise azure.identity.CredentialUnavailableError("no credential")
            return await super().get_token(*scopes, **kwargs)

        async def get_token_info(self, *scopes, options=None):
            if self.unavailable:
                raise azure.identity.CredentialUnavailableError("no credential")
            return await super().get_token_info(*scopes, options=options)

    azure.identity.DefaultAzureCredential = DefaultAzureCredential
    azure.identity.aio.DefaultAzureCredential = AsyncDefaultAzureCredential


_live_credentials()
