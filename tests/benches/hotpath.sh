#!/usr/bin/env bash
# The api's hot path side by side with the database's own limit, in one run:
#   1. pgbench -S (select-only, 32 clients) on the same Postgres;
#   2. wrk -t2 -c64 on GET /api/v1/scans/{id} (Bearer token, a scan with 20
#      findings), on GET /api/v1/scans (a page of 20) and on
#      GET /api/v1/dashboard/summary, against the release api with rate
#      limiting on (the tier's limit raised so that nothing is refused);
#   3. pgbench -S again; the reference is the mean of both pgbench runs.
# Prints requests/s, p50 and p99 for each endpoint and the ratio to pgbench.
#   bash tests/benches/hotpath.sh            # DURATION=15 seconds per run
# API_BIN=PATH runs that api binary instead of building this checkout's (to
# compare two versions in one sitting).
# PROFILE=FILE records the api with `perf record -g` during the scan-detail
# run (summarise with `perf report -i FILE --no-children --sort symbol`).
set -euo pipefail
cd "$(dirname "$0")/../.."
eval "$(./docker/dev-services.sh)"
command -v wrk >/dev/null || apt-get install -y wrk >/dev/null
command -v pgbench >/dev/null || apt-get install -y postgresql-contrib >/dev/null
duration="${DURATION:-15}"

if [ -n "${API_BIN:-}" ]; then
  bin=$API_BIN
else
  cargo build -q --release -p scanfleet-api
  bin="${CARGO_TARGET_DIR:-target}/release/scanfleet-api"
fi
admin_url="${DATABASE_URL%/*}/postgres"
db="scanfleet_hotpath_$$" pgb="scanfleet_pgbench_$$" prefix="hotpath-$$"
work=$(mktemp -d)
api_pid=""
cleanup() {
  [ -n "$api_pid" ] && kill "$api_pid" 2>/dev/null && wait "$api_pid" 2>/dev/null || true
  psql "$admin_url" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  psql "$admin_url" -qc "DROP DATABASE IF EXISTS $pgb WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
psql "$admin_url" -qc "CREATE DATABASE $db" -c "CREATE DATABASE $pgb"
pgbench -q -i -s 10 "${DATABASE_URL%/*}/$pgb" >/dev/null 2>&1

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
DATABASE_URL="${DATABASE_URL%/*}/$db" SCANFLEET_API__BIND="127.0.0.1:$port" \
  SCANFLEET_REDIS_PREFIX="$prefix" RUST_LOG=warn "$bin" > "$work/api.log" 2>&1 &
api_pid=$!
for _ in $(seq 1 100); do curl -sf "$base/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
curl -sf "$base/readyz" >/dev/null || { cat "$work/api.log"; exit 1; }

json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
curl -sf -XPOST "$base/api/v1/auth/register" -H 'content-type: application/json' \
  -d '{"email":"bench@example.com","password":"bench-password-1","full_name":"Bench"}' >/dev/null
token=$(curl -sf -XPOST "$base/api/v1/auth/login" -H 'content-type: application/json' \
  -d '{"email":"bench@example.com","password":"bench-password-1"}' | json 'd["access_token"]')
auth="authorization: Bearer $token"
target=$(curl -sf -XPOST "$base/api/v1/targets" -H "$auth" -H 'content-type: application/json' \
  -d '{"domain":"bench.example.com"}' | json 'd["id"]')
scan=$(curl -sf -XPOST "$base/api/v1/scans" -H "$auth" -H 'content-type: application/json' \
  -d "{\"target_id\":\"$target\"}" | json 'd["id"]')
psql -q "${DATABASE_URL%/*}/$db" <<SQL
UPDATE tiers SET rate_limit_rpm = 100000000;
INSERT INTO findings (id, scan_id, user_id, dedup_key, template_id, name, severity, host,
                      matched_at, description)
SELECT gen_random_uuid(), '$scan', s.user_id, 'k' || i, 'bench-' || i, 'Bench finding ' || i,
       (ARRAY['critical','high','medium','low','info'])[1 + i % 5],
       'bench.example.com', 'https://bench.example.com/p' || i, 'A finding.'
FROM scans s, generate_series(1, 20) i WHERE s.id = '$scan';
SQL
curl -sf "$base/api/v1/scans/$scan" -H "$auth" | json 'len(d["findings"])' | grep -qx 20

pgbench_tps() {
  pgbench -n -S -c 32 -j 2 -T "$duration" "${DATABASE_URL%/*}/$pgb" 2>/dev/null |
    awk '/^tps/ {print int($3)}'
}
# wrk's requests/s, p50 and p99 in ms, and non-2xx count.
run_wrk() {
  wrk -t2 -c64 -d"${duration}s" --latency -H "$auth" "$base$1" > "$work/wrk.txt"
  python3 - "$work/wrk.txt" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
def ms(v, unit):
    return float(v) * {"us": 0.001, "ms": 1, "s": 1000}[unit]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
p = dict((k, ms(v, u)) for k, v, u in re.findall(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", t, re.M))
bad = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
print(f"{rps:.0f} {p['50']:.2f} {p['99']:.2f} {bad.group(1) if bad else 0}")
PY
}

echo "pgbench -S -c 32 -j 2 -T $duration (run 1) ..."
pg1=$(pgbench_tps)
declare -A result
for path in "/api/v1/scans/$scan" "/api/v1/scans?limit=20" "/api/v1/dashboard/summary"; do
  echo "wrk -t2 -c64 -d${duration}s $path ..."
  perf_pid=""
  if [ -n "${PROFILE:-}" ] && [ "$path" = "/api/v1/scans/$scan" ]; then
    perf record -q -g -o "$PROFILE" -p "$api_pid" -- sleep "$duration" >/dev/null 2>&1 &
    perf_pid=$!
  fi
  result[$path]=$(run_wrk "$path")
  [ -z "$perf_pid" ] || wait "$perf_pid"
done
echo "pgbench -S -c 32 -j 2 -T $duration (run 2) ..."
pg2=$(pgbench_tps)
ref=$(((pg1 + pg2) / 2))
echo
echo "pgbench -S: $pg1 and $pg2 tps, reference $ref"
printf '%-32s %10s %9s %9s %7s %8s\n' endpoint 'req/s' 'p50 ms' 'p99 ms' ratio non-2xx
for path in "/api/v1/scans/$scan" "/api/v1/scans?limit=20" "/api/v1/dashboard/summary"; do
  read -r rps p50 p99 bad <<< "${result[$path]}"
  name=${path/$scan/\{id\}}
  printf '%-32s %10s %9s %9s %7s %8s\n' "GET ${name#/api/v1}" "$rps" "$p50" "$p99" \
    "$(python3 -c "print(f'{$rps / $ref:.2f}')")" "$bad"
done
