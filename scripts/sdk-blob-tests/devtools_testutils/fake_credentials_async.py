import time

from azure.core.credentials import AccessToken

from .fake_credentials import _token


class AsyncLiveTokenCredential:
    """The async twin of :class:`~.fake_credentials.LiveTokenCredential`."""

    async def get_token(self, *scopes, **kwargs):
        return AccessToken(_token(), int(time.time()) + 3600)

    async def get_token_info(self, *scopes, options=None):
        from azure.core.credentials import AccessTokenInfo

        return AccessTokenInfo(_token(), int(time.time()) + 3600)

    async def close(self):
        pass

    async def __aenter__(self):
        return self

    async def __aexit__(self, *args):
        pass


class AsyncFakeCredential:
    """As the real devtools_testutils' one: a token no service takes."""

    async def get_token(self, *scopes, **kwargs):
        return AccessToken("fake_token", 2527537086)

    async def close(self):
        pass

    async def __aenter__(self):
        return self

    async def __aexit__(self, *args):
        pass
