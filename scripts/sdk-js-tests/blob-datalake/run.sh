#!/usr/bin/env bash
# Run Microsoft's own @azure/storage-blob and @azure/storage-file-datalake test folders live
# against a fresh `tabulae serve` (see README.md). Usage:
#   scripts/sdk-js-tests/blob-datalake/run.sh SUITE [blob|datalake|both] [extra vitest arguments...]
# SUITE holds sdk/storage/{storage-blob,storage-file-datalake}, sdk/test-utils/test-utils-vitest
# and the monorepo's root tsconfig*.json, extracted from an azure-sdk-for-js checkout.
# Needs `tabulae` and a Python with azure-storage-blob on PATH, node/npm and openssl.
# PORT (default 47000): the Blob port; PORT+1 and PORT+2 serve Queue and Table.
set -euo pipefail
harness=$(cd "$(dirname "$0")" && pwd)
suite=$(cd "${1:?SUITE directory}" && pwd)
which=${2:-both}
shift $(($# < 2 ? $# : 2))
port=${PORT:-47000}

if [ ! -d "$suite/node_modules" ]; then
  cp "$harness/package.json" "$suite/package.json"
  (cd "$suite" && npm install --no-audit --no-fund)
fi
# The config and setup files resolve vitest from the suite's node_modules: they run from there.
mkdir -p "$suite/.tabulae-harness"
cp "$harness"/*.mjs "$suite/.tabulae-harness/"
config="$suite/.tabulae-harness/vitest.config.mjs"

work=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

names="DNS:*.blob.core.windows.net,DNS:*.dfs.core.windows.net,DNS:*.queue.core.windows.net"
openssl req -x509 -nodes -days 2 -newkey rsa:2048 -subj /CN=tabulae-sdk-js-tests \
  -addext "subjectAltName=$names,DNS:*.file.core.windows.net,IP:127.0.0.1" \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
tabulae serve --config "$harness/server.toml" --cert "$work/cert.pem" --key "$work/key.pem" \
  --blob-port "$port" --queue-port $((port + 1)) --port $((port + 2)) >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 50); do
  curl -skf "https://127.0.0.1:$port/-/ready" >/dev/null && break
  sleep 0.2
done

# The accounts' variables as Azure's test pipeline sets them (host-style URLs, sent here by
# redirect.mjs), account SAS tokens, and a token of the harness's identity.
python3 - "$harness/server.toml" >"$work/env.sh" <<'PY'
import sys, tomllib
from datetime import UTC, datetime, timedelta
from azure.storage.blob import AccountSasPermissions, ResourceTypes, generate_account_sas

keys = tomllib.load(open(sys.argv[1], "rb"))["accounts"]
roles = {"": "devstoreaccount1", "SECONDARY_": "devstoreaccount1", "SOFT_DELETE_": "jssoftdel",
         "DFS_": "jsdfs", "DFS_SOFT_DELETE_": "jsdfs"}
everything = AccountSasPermissions(read=True, write=True, delete=True, list=True, add=True, create=True,
                                   update=True, process=True, delete_previous_version=True, tag=True,
                                   filter_by_tags=True, set_immutability_policy=True, permanent_delete=True)
for prefix, account in roles.items():
    key = keys[account]
    print(f"export {prefix}ACCOUNT_NAME={account}")
    print(f"export {prefix}ACCOUNT_KEY='{key}'")
    sas = generate_account_sas(account, key, ResourceTypes(service=True, container=True, object=True),
                               everything, datetime.now(UTC) + timedelta(days=1))
    print(f"export {prefix}ACCOUNT_SAS='{sas}'")
    if prefix in ("", "DFS_"):
        conn = f"DefaultEndpointsProtocol=https;AccountName={account};AccountKey={key};EndpointSuffix=core.windows.net"
        print(f"export {prefix}STORAGE_CONNECTION_STRING='{conn}'")
print("export ENCRYPTION_SCOPE_1=testscope1 ENCRYPTION_SCOPE_2=testscope2")
PY
# shellcheck disable=SC1091
source "$work/env.sh"
ACCOUNT_TOKEN=$(node -e "import('$suite/.tabulae-harness/test-credential.mjs').then(m => console.log(m.makeToken(86400)))")
export ACCOUNT_TOKEN TEST_MODE=live TABULAE_TLS_PORT=$port NODE_EXTRA_CA_CERTS="$work/cert.pem"
export SUITE="$suite" HARNESS="$suite/.tabulae-harness"

status=0
for package in storage-blob storage-file-datalake; do
  case "$which:$package" in both:* | blob:storage-blob | datalake:storage-file-datalake) ;; *) continue ;; esac
  (cd "$suite/sdk/storage/$package" &&
    JSON_OUT="$suite/$package.json" npx vitest run --config "$config" --root . "$@") ||
    status=1
  node -e "const r = require('$suite/$package.json');
    console.log('$package: ' + r.numPassedTests + ' passed, ' + r.numFailedTests + ' failed, ' +
      r.numPendingTests + ' skipped')"
done
exit $status
