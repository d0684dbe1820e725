"""Run Microsoft's own azure-data-tables and azure-storage-queue tests live against Tabulae.

The tests ship in the packages' source distributions:

    pip download --no-deps --no-binary :all: azure-data-tables==12.7.0 \
        azure-storage-queue==12.18.1 -d /tmp/tqsdk
    for f in /tmp/tqsdk/*.tar.gz; do tar xzf "$f" -C /tmp/tqsdk; done

The interpreter running this script needs those SDKs, azure-identity, pytest, pytest-timeout,
python-dateutil (``test_table_entity*.py`` import it) and anyio (for the ``*_async.py``
files), as for ../sdk-blob-tests. The table tests speak HTTPS to
``https://devstoreaccount1.table.core.windows.net`` (no port), so the server serves TLS with a
certificate for those names, and takes bearer tokens for the AAD tests:

    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=sdk-tests \
        -addext subjectAltName=DNS:*.table.core.windows.net,DNS:*.queue.core.windows.net \
        -keyout key.pem -out cert.pem
    R=00000000-0000-0000-0000-0000000000aa
    tabulae serve --port T --queue-port Q --cert cert.pem --key key.pem --oauth basic \
        --oauth-role $R=owner --oauth-role $R=table-contributor \
        --oauth-role $R=queue-contributor --oauth-role $R=account-contributor ...
    python scripts/sdk-tests/run.py /tmp/tqsdk/azure_data_tables-12.7.0/tests \
        --table-port T --queue-port Q --ca cert.pem [files...] --out DIR

The harness's token identity needs the table and queue data roles and the management one, as
Azure's pipeline gives its test principal: with ``owner`` (a Blob role) alone every
``test_table_aad*.py`` test and the ``*_with_token_credential`` tests of
``test_table_client*.py`` get 403 AuthorizationPermissionMismatch, as they would in Azure.
``test_table_entity*.py``'s ``test_sas_signed_identifier`` sets a stored access policy that
expired on 2025-10-12, so its SAS is refused (403 AuthenticationFailed, as Azure refuses a SAS
out of its time frame) on any later date. The sync table tests sleep 10 seconds a test in live
mode (the SDK's ``_tear_down``): ``test_table_entity.py`` takes some 15 minutes.

Give each run an empty store (a fresh ``--data-dir`` or database): a few tests create queues
with fixed names (``testqueue1``) and never delete them, so a second run finds them there.

What is ours is the harness: ../sdk-blob-tests' ``devtools_testutils/`` and
``harness_plugin.py`` (live mode, every account the development account, host-style names
resolved to 127.0.0.1), and ``tq_plugin.py`` here (the table tests' account variables, their
port-less HTTPS names sent to the given ports, ``DefaultAzureCredential`` as the harness's
token). Files default to every test file of the directory but the ``*cosmos*`` ones, which
test Azure Cosmos DB's Table API, another service. Prints pass/fail counts per file; pytest's
logs go to ``--out``.

Older releases run the same way (../sdk-blob-tests' docstring: an interpreter per release, with
``six`` for those before 2022): azure-storage-queue 12.9.0 and azure-data-tables 12.4.4 as they
are, azure-storage-queue 12.4.0 and azure-data-tables 12.2.0 through the pre-test-proxy bases of
``devtools_testutils/legacy.py``. Every queue test of both passes (their async
``test_too_many_cors_rules`` and ``test_retention_too_long`` send ``<StorageServiceProperties />``
and expect Azure's recorded 400 InvalidXmlDocument). What fails there besides the above:
azure-data-tables 12.4.4's
``test_challenge_auth*.py`` mock a credential's ``get_token`` where azure-core 1.38 on asks
``get_token_info`` (client-side, no request sent); azure-data-tables 12.2.0's
``test_retry_on_socket_timeout`` expects a read timeout of 1e-12 seconds to fire, which a
loopback answer can beat.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BLOB_HARNESS = HERE.parent / "sdk-blob-tests"


def counts(line: str) -> dict[str, int]:
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?)", line)}


def summary(text: str) -> dict[str, int]:
    """The counts of pytest's closing line, wherever late warnings pushed it."""
    for line in reversed(text.strip().splitlines()):
        if " in " in line and counts(line):
            return counts(line)
    return {}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("tests", type=Path, help="the tests/ directory of the SDK's source distribution")
    parser.add_argument("files", nargs="*", help="test files (default: all but the Cosmos ones)")
    parser.add_argument("--table-port", type=int, required=True, help="Tabulae's Table port")
    parser.add_argument("--queue-port", type=int, required=True, help="Tabulae's Queue port")
    parser.add_argument("--ca", type=Path, required=True, help="the server's certificate (PEM)")
    parser.add_argument("--out", type=Path, default=Path("sdk-test-logs"), help="where pytest's logs go")
    parser.add_argument("--timeout", type=int, default=600, help="seconds one test may take")
    args = parser.parse_intermixed_args()
    files = args.files or sorted(p.name for p in args.tests.glob("test_*.py") if "cosmos" not in p.name)
    args.out.mkdir(parents=True, exist_ok=True)
    ca = str(args.ca.resolve())
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(map(str, (HERE, BLOB_HARNESS, args.tests))),
        SDK_TESTS_TABLE_PORT=str(args.table_port),
        SDK_TESTS_QUEUE_PORT=str(args.queue_port),
        SDK_TESTS_SCHEME="https",
        REQUESTS_CA_BUNDLE=ca,
        SSL_CERT_FILE=ca,
    )
    totals: dict[str, int] = {}
    for name in files:
        log = args.out / (Path(name).stem + ".log")
        with log.open("w") as handle:
            subprocess.run(
                [sys.executable, "-m", "pytest", "-p", "harness_plugin", "-p", "tq_plugin",
                 "-p", "no:cacheprovider", "-q", "-rfE", "--timeout", str(args.timeout), name],
                cwd=args.tests, env=env, stdout=handle, stderr=subprocess.STDOUT, check=False,
            )  # fmt: skip
        found = summary(log.read_text(errors="replace"))
        found["error"] = found.pop("errors", 0) + found.pop("error", 0)
        for word, number in found.items():
            totals[word] = totals.get(word, 0) + number
        print(
            f"{name}: "
            + ", ".join(f"{found.get(w, 0)} {w}" for w in ("passed", "failed", "skipped", "error")),
            flush=True,
        )
    print("total: " + ", ".join(f"{totals.get(w, 0)} {w}" for w in ("passed", "failed", "skipped", "error")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
