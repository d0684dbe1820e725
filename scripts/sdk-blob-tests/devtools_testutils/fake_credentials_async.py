import time

from azure.core.credentials import AccessToken

from .fake_credentials import _token


class _AsyncCredential:
    """What an async credential is besides its token: an async context that closes nothing."""

    async def close(self):
        pass

    async def __aenter__(self):
        return self

    async def __aexit__(self, *args):
        pass


class AsyncLiveTokenCredential(_AsyncCredential):
    """The async twin of :class:`~.fake_credentials.LiveTokenCredential`."""

    async def get_token(self, *scopes, **kwargs):
        return AccessToken(_token(scopes), int(time.time()) + 3600)

    async def get_token_info(self, *scopes, options=None):
        from azure.core.credentials import AccessTokenInfo

        return AccessTokenInfo(_token(scopes), int(time.time()) + 3600)


class AsyncFakeCredential(_AsyncCredential):
    """As the real devtools_testutils' one: a token no service takes."""

    async def get_token(self, *scopes, **kwargs):
        return AccessToken("fake_token", 2527537086)
