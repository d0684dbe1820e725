import base64
import json
import time

from azure.core.credentials import AccessToken

STORAGE_ACCOUNT_FAKE_KEY = base64.b64encode(b"fakekey" * 8).decode()


def _token(scopes=()):
    """An Entra token for the first scope's resource (``https://storage.azure.com/.default`` ->
    ``https://storage.azure.com``), as Entra issues it: the tests with a client ``audience``
    (``test_bad_audience_*``) ask for another account's and expect the service to refuse it."""
    audience = scopes[0].removesuffix("/.default") if scopes else "https://storage.azure.com"
    header = base64.urlsafe_b64encode(b'{"alg":"none"}').rstrip(b"=").decode()
    claims = {
        "aud": audience,
        "iss": "https://sts.windows.net/x/",
        "nbf": int(time.time()) - 60,
        "exp": int(time.time()) + 3600,
        "oid": "00000000-0000-0000-0000-0000000000aa",  # Entra tokens name the identity and tenant
        "tid": "00000000-0000-0000-0000-0000000000bb",
    }
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{header}.{body}.sig"


class LiveTokenCredential:
    """What ``get_credential`` gives in live mode: a token the server takes (``--oauth basic``
    checks audience, issuer and times, not the signature)."""

    def get_token(self, *scopes, **kwargs):
        return AccessToken(_token(scopes), int(time.time()) + 3600)

    def get_token_info(self, *scopes, options=None):
        from azure.core.credentials import AccessTokenInfo

        return AccessTokenInfo(_token(scopes), int(time.time()) + 3600)


class FakeTokenCredential:
    """As the real devtools_testutils' one: a token no service takes, already expired (so the
    SDK asks for it before every try), and how many times it was asked for."""

    def __init__(self):
        self.token = AccessToken("YOU SHALL NOT PASS", 0)
        self.get_token_count = 0

    def get_token(self, *scopes, **kwargs):
        self.get_token_count += 1
        return self.token
