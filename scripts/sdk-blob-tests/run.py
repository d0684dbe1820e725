"""Run Microsoft's own azure-storage-blob tests live against a local Blob endpoint.

The tests ship in the package's source distribution; get the version of the SDK you test with:

    pip download --no-deps --no-binary :all: azure-storage-blob==12.31.1 -d /tmp/sdk
    tar xzf /tmp/sdk/azure_storage_blob-12.31.1.tar.gz -C /tmp/sdk

They need the SDK with its ``ext-checksums`` extra (``pip install
'azure-storage-blob[ext-checksums]==12.31.1'``, which brings azure-storage-extensions: without
it every CRC64 test of ``test_content_validation*.py`` fails in the SDK, before a request is
sent), pytest, pytest-timeout, anyio (its pytest plugin runs the ``*_async.py`` files),
requests, aiohttp, typing_extensions, PyJWT and nanoarrow (``test_arrow*.py``: the same) in the
interpreter that runs this script.
Then, with a server listening (Tabulae's Blob port, or ``azurite-blob --blobPort PORT`` for
comparison):

    python scripts/sdk-blob-tests/run.py /tmp/sdk/azure_storage_blob-12.31.1/tests PORT [--out DIR]

What is ours here is the harness, not the tests: ``devtools_testutils/`` stands in for the Azure
SDK repository's test-proxy helpers (live mode only: no recordings, no proxy), and
``harness_plugin.py`` points every account at ``devstoreaccount1`` with its well-known key,
resolves the host-style names the tests build (``devstoreaccount1.blob.core.windows.net``) to
127.0.0.1 so nothing leaves the machine, and stubs the management-plane client a few tests
import. Prints pass/fail counts per file; pytest's logs go to ``--out``.

Azure's test pipeline gives some tests accounts of their own: another account to copy from
(``secondary``), one with blob versioning, one with blob soft delete, a premium page blob
account. Without ``--accounts`` they are all the development account, so those tests fail or
prove nothing (a copy from "another" account is one from the same). With ``--accounts`` they are the accounts
``server.toml`` serves, which also names the tests' encryption scopes and accepts bearer
tokens (the harness's token identity is a data owner, as the pipeline's test principal is);
this script turns on the soft-delete accounts' delete retention before the tests::

    tabulae serve --config scripts/sdk-blob-tests/server.toml --blob-port PORT --cert C --key K
    python scripts/sdk-blob-tests/run.py TESTS PORT --accounts --ca C

Start each run on an empty store (a new data directory or database): a few tests list the
whole account (containers by prefix, blobs by index tags) and count only their own, which a
second run against the same store finds beside those the first run left behind.

What fails there for reasons other than the Blob service (12.31.1, every test file, sync and
async): the ``*_from_file_to_blob_with_oauth`` tests (an Azure Files share as the source; no
File service here), those that need the internet (``test_abort_copy_blob`` copies from
www.gutenberg.org, and, in the async file, ``test_create_blob_with_requests`` reads
en.wikipedia.org and ``test_oauth_error_handling`` asks login.microsoftonline.com for a token),
``test_quick_query_*_parquet_format`` (their ``resources/parquet.parquet`` is not in the source
distribution), and without ``--accounts`` the page blob ``test_blob_tier_*`` tests (they need a
premium page blob account, tiers P4..P80: with ``--accounts`` they get ``server.toml``'s
``sdkpremium``). ``test_largest_block_blob*.py`` allocate 4000 MiB in the test
process (the tests drop the payload before it is sent).

The azure-storage-file-datalake tests run the same way (``pip download
azure-storage-file-datalake==12.26.1``, its tests/ directory, naming its files): with
``--accounts`` their Data Lake account and soft-delete account are ``server.toml``'s two
accounts with a hierarchical namespace; without it they are the development account, which
then needs ``tabulae serve --hns devstoreaccount1``. Their interpreter also needs
azure-storage-extensions (``test_content_validation*.py`` use crc64: without it 13 tests of each
fail in the SDK), and ``test_quick_query.py``'s two Parquet tests read
``tests/resources/parquet.parquet``, which the source distribution does not ship (without it
they fail opening it; its content is recorded, base64, in the request bodies of their
recordings in Azure/azure-sdk-assets).

Older releases' suites run the same way, each in an interpreter with that release installed (and
``six``, which SDKs before 2022 import and azure-core no longer brings). Those written for the
test proxy (azure-storage-blob 12.19.1, azure-storage-file-datalake 12.14.0) run as they are;
the ones before it (azure-storage-blob 12.11.0, azure-storage-file-datalake 12.6.0, and for
../sdk-tests azure-storage-queue 12.4.0 and azure-data-tables 12.2.0: ``unittest.TestCase``
classes on ``StorageTestCase``/``AzureTestCase`` whose preparer runs the async tests) through
``devtools_testutils/legacy.py``; and older still (azure-storage-blob 12.8.1, whose tests get
their accounts from management-plane preparers) through ``devtools_testutils/mgmt_era.py`` and
``azure_devtools/``: the session's account is the development one, a ``StorageAccountPreparer``
gives ``server.toml``'s (the secondary one for ``parameter_name='rmt'``, the premium page blob
account for ``sku='premium_LRS'``).
What fails there besides the above: the ``*_with_immutability_policy`` and legal hold tests
(version-level immutability is turned on for their container through the management plane,
which the harness's stub does on the data plane: they pass, all 17 of 12.11.0 and of 12.19.1,
on a server whose ``sdkversioned`` account has ``version-level-immutability = true`` in its
``[account-features]``, run by themselves, ``python -m pytest -p harness_plugin -k
'immutability or legal_hold'`` with run.py's environment; not in the full run, where the
versioning tests' teardowns could not delete their containers);
``test_set_blob_tags_using_blob_sas`` and ``test_filter_blobs_using_account_sas`` of 12.11.0
(each finds the other's blob: same tags, the whole account searched; 12.8.1's
``test_set_blob_tags_using_blob_sas`` the same); in 12.8.1 and 12.11.0, besides the internet
tests above, the async ``test_create_blob_with_aiohttp_async`` (it reads www.gutenberg.org);
12.8.1's ``test_quick_query_iter_records_with_headers``, which asks for HasHeaders in the output
at 2020-06-12 and expects no header row (Azure wrote none at 2019-12-12 and writes one at
2020-10-02, as Tabulae does; what 2020-06-12 did is not recorded); 12.8.1's and 12.11.0's
``test_quick_query_output_in_arrow_format`` (the Arrow bytes below); and
azure-storage-file-datalake 12.6.0's ``test_quick_query_output_in_arrow_format``, which expects
the Arrow stream Azure wrote in 2021 (metadata version 4) byte for byte, where Azure's later
recordings, and Tabulae, write version 5 (12.14.0 no longer compares the bytes).
Also run so: azure-storage-blob 12.6.0 (x-ms-version 2020-02-10, through ``mgmt_era.py``),
12.14.1 (2021-08-06), 12.23.1 (2024-11-04) and 12.25.1 (2025-05-05); azure-storage-file-datalake
12.2.3 (with azure-storage-blob 12.7.1; its ``tests/testcase.py`` reads a ``settings_real.py``
beside it: the ``sdkdatalake`` account and key, ``CONNECTION_STRING = ''``, ``TEST_MODE =
'RunLiveNoRecord'``, and it imports adal and vcrpy), 12.9.1 (with azure-storage-blob 12.14.1) and
12.18.1; and, through this script with the Queue port, azure-storage-queue 12.1.6 (2018-03-28,
``mgmt_era.py`` too). What fails there besides the above: 12.6.0's
``test_set_blob_tags_using_blob_sas`` (as 12.8.1's), Arrow test and async
``test_invalid_value_kek_unwrap_async`` (it compares the whole text of the SDK's decryption error,
to which today's azure-core adds the response body); azure-storage-file-datalake 12.2.3's Arrow
test (the bytes, as 12.6.0's; its OAuth and user delegation tests, whose ``generate_oauth_token``
signs in at login.microsoftonline.com, get the harness's tokens from ``harness_plugin.py``), and its
``test_quick_query_iter_records_with_headers``, whose query goes out at 2020-04-08 (the Blob SDK's
version) and expects no header row: Azure wrote none at 2020-02-10 (recorded) and one at 2020-10-02,
2020-04-08 is not recorded, and Tabulae writes it; azure-storage-queue 12.1.6's
``test_encryption_nonmatching_kid`` and ``test_missing_attribute_kek_unrwap`` (sync and async),
the same decryption error text (client side).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

FILES = (
    "test_container.py",
    "test_block_blob.py",
    "test_get_blob.py",
    "test_append_blob.py",
    "test_common_blob.py",
    "test_blob_access_conditions.py",
)
HERE = Path(__file__).resolve().parent


def counts(summary: str) -> dict[str, int]:
    return {word: int(number) for number, word in re.findall(r"(\d+) (passed|failed|skipped|error)", summary)}


def _summary(text: str) -> str:
    """pytest's closing line ("3 passed, 1 failed in 2.0s"), wherever late warnings (an aio
    client's unclosed session, printed at exit) pushed it."""
    for line in reversed(text.strip().splitlines()):
        if counts(line) and " in " in line:
            return line
    return ""


#: The tests' account roles (their environment variables' prefixes) and server.toml's accounts.
ROLES = {
    "SECONDARY_STORAGE": "sdksecondary",
    "VERSIONED_STORAGE": "sdkversioned",
    "SOFT_DELETE_STORAGE": "sdksoftdelete",
    "DATALAKE_STORAGE": "sdkdatalake",  # azure-storage-file-datalake's tests: HNS accounts
    "STORAGE_DATA_LAKE_SOFT_DELETE": "sdkdlsoftdelete",
    "PREMIUM_STORAGE": "sdkpremium",  # a premium page blob account (Premium_LRS, tiers P4..P80)
}
#: The accounts whose blob soft delete Azure's pipeline turns on.
SOFT_DELETE_ROLES = ("SOFT_DELETE_STORAGE", "STORAGE_DATA_LAKE_SOFT_DELETE")


def _account_keys() -> dict[str, str]:
    import tomllib

    return tomllib.loads((HERE / "server.toml").read_text())["accounts"]


def _account_variables() -> dict[str, str]:
    keys = _account_keys()
    variables = {}
    for role, account in ROLES.items():
        variables[f"{role}_ACCOUNT_NAME"] = account
        variables[f"{role}_ACCOUNT_KEY"] = keys[account]
    return variables


def _enable_soft_delete(port: int, ca: Path | None) -> None:
    """Blob soft delete on the soft-delete accounts, as Azure's pipeline provisions them."""
    from azure.storage.blob import BlobServiceClient, RetentionPolicy

    scheme = "http" if ca is None else "https"
    for role in SOFT_DELETE_ROLES:
        account = ROLES[role]
        client = BlobServiceClient(
            f"{scheme}://127.0.0.1:{port}/{account}",
            credential={"account_name": account, "account_key": _account_keys()[account]},
            connection_verify=str(ca) if ca is not None else True,
        )
        client.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=True, days=1))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("tests", type=Path, help="the tests/ directory of the SDK's source distribution")
    parser.add_argument("port", type=int, help="the Blob endpoint's port on 127.0.0.1")
    parser.add_argument(
        "files", nargs="*", default=list(FILES), help="test files (default: the six of issue 19)"
    )
    parser.add_argument("--out", type=Path, default=Path("sdk-blob-test-logs"), help="where pytest's logs go")
    parser.add_argument(
        "--ca",
        type=Path,
        help="speak HTTPS, trusting this PEM certificate (valid for *.blob.core.windows.net): the "
        "tests with a token credential (OAuth, user delegation SAS) need it, as the SDK sends tokens "
        "over HTTPS only",
    )
    parser.add_argument(
        "--accounts",
        action="store_true",
        help="the server serves server.toml's accounts: give the tests that want a secondary, a "
        "versioned, a soft-delete or a premium page blob account those (see above)",
    )
    parser.add_argument(
        "--timeout",
        type=int,
        default=600,
        help="seconds one test may take (pytest-timeout): a few check a MiB byte by byte in Python, "
        "minutes on a loaded machine (default 600)",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, SDK_TESTS_PORT=str(args.port), PYTHONPATH=f"{HERE}{os.pathsep}{args.tests}")
    if args.ca is not None:
        ca = str(args.ca.resolve())
        env.update(SDK_TESTS_SCHEME="https", REQUESTS_CA_BUNDLE=ca, SSL_CERT_FILE=ca)
    if args.accounts:
        env.update(_account_variables())
        _enable_soft_delete(args.port, args.ca)
    totals: dict[str, int] = {}
    for name in args.files:
        log = args.out / (Path(name).stem + ".log")
        with log.open("w") as handle:
            subprocess.run(
                [sys.executable, "-m", "pytest", "-p", "harness_plugin", "-p", "no:cacheprovider",
                 "-q", "-rfE", "--timeout", str(args.timeout), name],
                cwd=args.tests, env=env, stdout=handle, stderr=subprocess.STDOUT, check=False,
            )  # fmt: skip
        summary = _summary(log.read_text(errors="replace"))
        found = counts(summary)
        for word, number in found.items():
            totals[word] = totals.get(word, 0) + number
        print(f"{name}: {found.get('passed', 0)} passed, {found.get('failed', 0)} failed, "
              f"{found.get('skipped', 0)} skipped, {found.get('error', 0)} errors", flush=True)  # fmt: skip
    passed, failed, skipped, errors = (
        totals.get(word, 0) for word in ("passed", "failed", "skipped", "error")
    )
    # A test whose setup fails is an error, not a failure: counted apart, never dropped.
    print(f"total: {passed} passed, {failed} failed, {skipped} skipped, {errors} errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
