"""A minimal stand-in for azure-sdk-tools' devtools_testutils, for running the blob tests live
against a local endpoint (no test proxy, no recordings). Written for Tabulae's harness."""

import functools
import os

from .fake_credentials import STORAGE_ACCOUNT_FAKE_KEY, FakeTokenCredential  # noqa


def is_live():
    return True


def _noop(*args, **kwargs):
    return None


add_body_regex_sanitizer = add_general_regex_sanitizer = add_header_regex_sanitizer = _noop
add_oauth_response_sanitizer = add_uri_regex_sanitizer = set_custom_default_matcher = _noop


def recorded_by_proxy(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        kwargs.pop("variables", None)
        return func(*args, **kwargs)

    return wrapper


class Secret(str):
    """A key that is also itself (tests use both ``key`` and ``key.secret``)."""

    @property
    def secret(self):
        return str(self)


class EnvironmentVariableOptions:
    def __init__(self, hide_secrets=None):
        self.hide_secrets = hide_secrets or []


class EnvironmentVariableLoader:
    """``@BlobPreparer()``: passes the account names and keys from the environment."""

    def __init__(self, directory, options=None, **defaults):
        self.defaults = defaults

    def __call__(self, func):
        import inspect

        names = list(self.defaults)

        # Like the real loader, pass only what the test takes: a few take no **kwargs.
        parameters = inspect.signature(func).parameters
        takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())

        def values():
            found = {}
            for name in names:
                if not takes_all and name not in parameters:
                    continue
                value = os.environ.get(name.upper(), self.defaults[name])
                if name.endswith("_key"):
                    value = Secret(value)
                found[name] = value
            return found

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def awrapper(*args, **kwargs):
                return await func(*args, **{**values(), **kwargs})

            return awrapper

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            return func(*args, **{**values(), **kwargs})

        return wrapper


class ResponseCallback:
    def __init__(self, status=None, new_status=None):
        self.status = status
        self.new_status = new_status
        self.first = True
        self.count = 0

    def override_first_status(self, response):
        if self.first and response.http_response.status_code == self.status:
            response.http_response.status_code = self.new_status
            self.first = False
        self.count += 1

    def override_status(self, response):
        if response.http_response.status_code == self.status:
            response.http_response.status_code = self.new_status
        self.count += 1


class RetryCounter:
    def __init__(self):
        self.count = 0

    def simple_count(self, retry_context):
        self.count += 1
