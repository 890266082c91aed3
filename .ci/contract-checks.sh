#!/usr/bin/env bash
# Contract checks against a running instance: a client generated from
# openapi/openapi.json with openapi-python-client has one class per shape
# (.ci/duplicate_classes.py) and walks register -> target ->
# scan -> detail -> dashboard -> checkout (through the dev payment stand-in)
# -> monthly, then schemathesis fuzzes every operation, the payment ones
# included, authenticated as the admin, with every check (`--checks all`:
# server errors, status code, content type, headers and schema conformance,
# negative data rejection, positive data acceptance, ignored auth, missing
# required headers, undeclared methods and Allow headers, and the stateful
# ones). .ci/schemathesis.toml lists, with reasons, the operations whose
# values have rules a schema cannot state.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(./docker/dev-services.sh)"
python3 -m pip install -q openapi-python-client schemathesis

cargo build -q -p scanfleet-api
work=$(mktemp -d)
db="scanfleet_contract_$$"
admin_url="${DATABASE_URL%/*}/postgres"
prefix="contract-$$"
api_pid=""
cleanup() {
  [ -n "$api_pid" ] && kill "$api_pid" 2>/dev/null && wait "$api_pid" 2>/dev/null || true
  psql "$admin_url" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
psql "$admin_url" -qc "CREATE DATABASE $db"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
# Hosts-only with an empty hosts map: the ownership checks that the fuzzer
# reaches (`verify_target` on the targets it creates) look nothing up
# outside this machine, neither DNS nor HTTP.
DATABASE_URL="${DATABASE_URL%/*}/$db" SCANFLEET_API__BIND="127.0.0.1:$port" \
  SCANFLEET_REDIS_PREFIX="$prefix" SCANFLEET_RATE__ENABLED=false RUST_LOG=warn \
  SCANFLEET_SCANNER__HOSTS_ONLY=true \
  SCANFLEET_ADMIN_EMAIL=admin@contract.example SCANFLEET_ADMIN_PASSWORD=contract-admin-pw \
  "${CARGO_TARGET_DIR:-target}/debug/scanfleet-api" > "$work/api.log" 2>&1 &
api_pid=$!
for _ in $(seq 1 100); do
  curl -sf "$base/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -sf "$base/readyz" >/dev/null || { cat "$work/api.log"; exit 1; }

echo "== generated client walk"
openapi-python-client generate --path openapi/openapi.json --meta none \
  --output-path "$work/scanfleet_client" >/dev/null
echo "== one generated class per shape"
python3 .ci/duplicate_classes.py "$work/scanfleet_client" openapi/openapi.json
PYTHONPATH="$work" python3 .ci/contract_walk.py "$base"

echo "== schemathesis"
token=$(curl -sf -XPOST "$base/api/v1/auth/login" -H 'content-type: application/json' \
  -d '{"email":"admin@contract.example","password":"contract-admin-pw"}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')
schemathesis --config-file .ci/schemathesis.toml run "$base/api/v1/openapi.json" \
  --checks all \
  --header "Authorization: Bearer $token" \
  --max-examples "${SCHEMATHESIS_MAX_EXAMPLES:-25}" \
  --seed 1 --no-color
