import inspect
import logging
import math
import os
import random
import string
import time
import uuid

from ..fake_credentials import LiveTokenCredential

_SALT = uuid.uuid4().hex
LOGGING_FORMAT = "%(asctime)s %(name)-20s %(levelname)-5s %(message)s"


class StorageRecordedTestCase:
    """What the blob tests use of the recorded test case, live only."""

    @property
    def is_live(self):
        return True

    def is_playback(self):
        return False

    def account_url(self, storage_account, account_type):
        """Host-style, as the tests expect: ``http://{account}.blob.core.windows.net:{port}``
        (the harness plugin resolves that name to 127.0.0.1); ``https`` with ``run.py --ca``.
        ../sdk-tests/run.py names a port per service (``SDK_TESTS_TABLE_PORT``)."""
        port = os.environ.get(f"SDK_TESTS_{account_type.upper()}_PORT") or os.environ["SDK_TESTS_PORT"]
        scheme = os.environ.get("SDK_TESTS_SCHEME", "http")
        return f"{scheme}://{storage_account}.{account_type}.core.windows.net:{port}"

    def get_resource_name(self, name):
        """Deterministic within a test (as recorded names are), unique across runs."""
        import hashlib

        test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
        digest = hashlib.md5(f"{_SALT}{test}{name}".encode()).hexdigest()[:8]
        return name + digest

    def create_random_name(self, name):
        return self.get_resource_name(name)

    def get_random_bytes(self, size):
        """Not ``os.urandom``: the blob and queue encryption tests patch that with a stub that
        calls itself for sizes other than an IV's or a key's (their recordings never reach it)."""
        return random.randbytes(size)

    def setup_method(self, method):
        """The queue client tests set up in unittest's ``setUp``, which pytest calls only on a
        ``unittest.TestCase``."""
        set_up = getattr(self, "setUp", None)
        if set_up is not None:
            set_up()

    def get_random_text_data(self, size):
        return "".join(random.choice(string.ascii_letters) for _ in range(size))

    def connection_string(self, account_name, key):
        """An account's connection string by its host-style endpoints, as Azure's test base gives."""
        return (
            f"DefaultEndpointsProtocol=https;AccountName={account_name};AccountKey={key};"
            "EndpointSuffix=core.windows.net"
        )

    def get_datetime_variable(self, variables, name, dt):
        variables[name] = str(dt)
        return dt

    def generate_sas(self, fn, *args, **kwargs):
        return fn(*args, **kwargs)

    def generate_oauth_token(self):
        return LiveTokenCredential()

    def generate_fake_token(self):
        """A token no service takes (older suites' ``test_token_credential``)."""
        from ..fake_credentials import FakeTokenCredential

        return FakeTokenCredential()

    def get_credential(self, client_class, **kwargs):
        if kwargs.get("is_async"):
            from ..fake_credentials_async import AsyncLiveTokenCredential

            return AsyncLiveTokenCredential()
        return LiveTokenCredential()

    def get_settings_value(self, key):
        return os.environ.get(key, "")

    def sleep(self, seconds):
        time.sleep(seconds)

    def assertNamedItemInContainer(self, container, item_name, msg=None):
        assert any(getattr(item, "name", None) == item_name for item in container), msg

    def assertNamedItemNotInContainer(self, container, item_name, msg=None):
        assert not any(getattr(item, "name", None) == item_name for item in container), msg

    def assert_upload_progress(self, size, max_chunk_size, progress, unknown_size=False):
        total = None if unknown_size else size
        small = size % max_chunk_size
        assert len(progress) == math.ceil(size / max_chunk_size)
        for current, reported_total in progress:
            assert current % max_chunk_size == 0 or current % max_chunk_size == small
            assert reported_total == total

    def assert_download_progress(self, size, max_chunk_size, max_get_size, progress):
        if size <= max_get_size:
            assert len(progress) == 1
        else:
            for current, total in progress[1:]:
                assert 0 < current <= size
                assert total == size


class LogCaptured:
    def __init__(self, test_case=None):
        self.test_case = test_case

    def __enter__(self):
        import io

        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.logger = logging.getLogger("azure.storage")
        self.logger.addHandler(self.handler)
        self.level = self.logger.level
        self.logger.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *args):
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.level)

    def getvalue(self):
        return self.stream.getvalue()


class _ServiceVersions:
    """``ServiceVersion.V2019_12_12`` -> ``"2019-12-12"`` (the older suites' skip conditions)."""

    def __getattr__(self, name):
        if not name.startswith("V"):
            raise AttributeError(name)
        return name[1:].replace("_", "-")


ServiceVersion = _ServiceVersions()


def is_version_before(version):
    """False: the suites run at the SDK's own (latest) service version, as Azure's live runs do
    unless told another (``AZURE_LIVE_TEST_SERVICE_VERSION``)."""
    return False


def _parametrized(*names):
    """As the real decorators: a wrapper whose own signature names the parametrized arguments,
    so that pytest fills them (``recorded_by_proxy``'s wrapper hides the test's own), passing
    them on by name."""

    def decorate(func):
        def wrapper(test_class, *values, **kwargs):
            return func(test_class, **dict(zip(names, values, strict=True)), **kwargs)

        parameters = [inspect.Parameter("test_class", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        parameters += [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in names]
        parameters.append(inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD))
        wrapper.__signature__ = inspect.Signature(parameters)
        wrapper.__name__, wrapper.__qualname__ = func.__name__, func.__qualname__
        return wrapper

    return decorate


def GenericTestProxyParametrize1():
    return _parametrized("a")


def GenericTestProxyParametrize2():
    return _parametrized("a", "b")


def __getattr__(name):
    """``StorageTestCase``, the older suites' base, from :mod:`..legacy` (which builds on this
    module) once asked for."""
    if name == "StorageTestCase":
        from ..legacy import StorageTestCase

        return StorageTestCase
    raise AttributeError(name)
