#!/usr/bin/env bash
# Bench of one scanfleet-oob server on loopback: how many HTTP callbacks a
# second it stores (wrk against a registered payload host), its RSS during
# and after the load, and poll throughput (one poll taking everything, then
# wrk on /poll). Needs wrk (apt-get install -y wrk), openssl, curl, python3
# and Redis at REDIS_URL (default redis://127.0.0.1:6379). Every request
# goes to 127.0.0.1 only; each wrk run is bounded in time.
#
#   scanner/oob/benches/oob.sh [SECONDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/../../.."
SECONDS_RUN=${1:-10}
CONNECTIONS=${2:-64}
TARGET=${CARGO_TARGET_DIR:-target}
PREFIX="oobbench-$$-$(date +%s)"
DOMAIN=oob.bench
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}

for tool in wrk openssl curl python3; do
  command -v "$tool" >/dev/null || { echo "oob bench: $tool is missing" >&2; exit 1; }
done
cargo build -q --release -p scanfleet-oob
BIN="$TARGET/release/scanfleet-oob"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
HTTP_PORT=$(free_port); DNS_PORT=$(free_port); METRICS_PORT=$(free_port)
WORK=$(mktemp -d)
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
  redis-cli -u "$REDIS_URL" --scan --pattern "$PREFIX:*" 2>/dev/null | xargs -r redis-cli -u "$REDIS_URL" del >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

SCANFLEET_REDIS_PREFIX=$PREFIX RUST_LOG=warn "$BIN" --domain "$DOMAIN" --ip 127.0.0.1 \
  --http "127.0.0.1:$HTTP_PORT" --dns "127.0.0.1:$DNS_PORT" --metrics "127.0.0.1:$METRICS_PORT" \
  >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$HTTP_PORT/" && break; sleep 0.1; done

rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$SERVER_PID/status"; }
counter() { curl -s "http://127.0.0.1:$METRICS_PORT/metrics" | awk -v m="$1" 'index($0, m) == 1 {print $2}' | head -1; }

# A registration as any interactsh client makes it: RSA-2048, PKIX DER in
# a PEM block labelled RSA PUBLIC KEY, base64.
openssl genrsa -out "$WORK/key.pem" 2048 2>/dev/null
PUBLIC=$(openssl rsa -in "$WORK/key.pem" -pubout 2>/dev/null | sed 's/PUBLIC KEY/RSA PUBLIC KEY/' | base64 -w0)
ID=$(python3 -c 'import random; print("".join(random.choice("0123456789abcdefghijklmnopqrstuv") for _ in range(20)))')
SECRET=$(python3 -c 'import uuid; print(uuid.uuid4())')
curl -sf -X POST "http://127.0.0.1:$HTTP_PORT/register" \
  -d "{\"public-key\":\"$PUBLIC\",\"secret-key\":\"$SECRET\",\"correlation-id\":\"$ID\"}" >/dev/null
HOST="${ID}ybndrfg8ejkmc.$DOMAIN"

echo "scanfleet-oob bench: $SECONDS_RUN s, $CONNECTIONS connections, 2 wrk threads, $(nproc) cores"
echo "RSS idle: $(rss_kib) KiB"
(sleep $((SECONDS_RUN / 2)); rss_kib >"$WORK/rss-during") &
SAMPLER=$!
wrk -t2 -c"$CONNECTIONS" -d"${SECONDS_RUN}s" -H "Host: $HOST" "http://127.0.0.1:$HTTP_PORT/" >"$WORK/wrk-callbacks.txt"
wait "$SAMPLER"
kill -0 "$SERVER_PID" || { echo "oob bench: the server died:" >&2; cat "$WORK/server.log" >&2; exit 1; }
STORED=$(counter 'oob_interactions_stored_total{protocol="http"}')
echo "callbacks: $(awk '/Requests\/sec/ {print $2}' "$WORK/wrk-callbacks.txt") requests/s answered;" \
  "$STORED stored = $(python3 -c "print(round(${STORED:-0} / $SECONDS_RUN))") interactions/s stored"
echo "callback latency: $(awk '/Latency/ {print $2 " avg, " $4 " max"}' "$WORK/wrk-callbacks.txt")"
echo "RSS during load: $(cat "$WORK/rss-during") KiB; after: $(rss_kib) KiB"

# Drain everything, 10,000 interactions a poll at most.
ITEMS=0; POLLS=0; BIGGEST=0; HTTP_TIME=0
while :; do
  TOOK=$(curl -sf -w '%{time_total}' "http://127.0.0.1:$HTTP_PORT/poll?id=$ID&secret=$SECRET" -o "$WORK/poll.json")
  HTTP_TIME=$(python3 -c "print($HTTP_TIME + $TOOK)")
  COUNT=$(python3 -c "import json; print(len(json.load(open('$WORK/poll.json'))['data']))")
  [ "$COUNT" = 0 ] && break
  ITEMS=$((ITEMS + COUNT)); POLLS=$((POLLS + 1))
  SIZE=$(du -k "$WORK/poll.json" | cut -f1); [ "$SIZE" -gt "$BIGGEST" ] && BIGGEST=$SIZE
done
echo "drain: $ITEMS interactions in $POLLS polls (largest answer $BIGGEST KiB) in" \
  "$(python3 -c "print(round($HTTP_TIME, 2))") s of poll requests = $(python3 -c "print(round($ITEMS / $HTTP_TIME))") interactions/s"
echo "RSS after the drain: $(rss_kib) KiB"
wrk -t2 -c16 -d5s "http://127.0.0.1:$HTTP_PORT/poll?id=$ID&secret=$SECRET" >"$WORK/wrk-poll.txt"
echo "polls of an empty session: $(awk '/Requests\/sec/ {print $2}' "$WORK/wrk-poll.txt") requests/s"
