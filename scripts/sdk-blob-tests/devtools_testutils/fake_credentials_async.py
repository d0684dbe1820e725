import time

from azure.core.credentials import AccessToken

from .fake_credentials import _token


class AsyncFakeCredential:
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
