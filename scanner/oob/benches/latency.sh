#!/usr/bin/env bash
# Callback-to-finding latency of out-of-band detection: the engine
# (`scanfleet-scanner run`) sends 100 requests, each with its own payload
# host, to a local lab whose /fetch route calls that host back at once on
# our scanfleet-oob server (HTTP, on loopback); the engine polls the server
# every POLL seconds (default 1). Latency per callback: the finding's
# timestamp minus the moment the lab's callback was answered by the server.
# Prints p50, p90 and max over the callbacks, and how many were found.
# Needs python3, curl and Redis at REDIS_URL (default redis://127.0.0.1:6379);
# every request goes to 127.0.0.1 only.
#
#   scanner/oob/benches/latency.sh [CALLBACKS] [POLL]
# BENCH_PROFILE=debug uses debug builds (the latency is mostly the poll
# period; the default is release).
set -euo pipefail
cd "$(dirname "$0")/../../.."
CALLBACKS=${1:-100}
POLL=${2:-1}
TARGET=${CARGO_TARGET_DIR:-target}
PREFIX="ooblatency-$$-$(date +%s)"
DOMAIN=oob.bench
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}

PROFILE=${BENCH_PROFILE:-release}
if [ "$PROFILE" = release ]; then
  cargo build -q --release -p scanfleet-oob -p scanfleet-scanner
else
  cargo build -q -p scanfleet-oob -p scanfleet-scanner
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
HTTP_PORT=$(free_port); DNS_PORT=$(free_port); LAB_PORT=$(free_port)
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  redis-cli -u "$REDIS_URL" --scan --pattern "$PREFIX:*" 2>/dev/null | xargs -r redis-cli -u "$REDIS_URL" del >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

SCANFLEET_REDIS_PREFIX=$PREFIX RUST_LOG=warn "$TARGET/$PROFILE/scanfleet-oob" --domain "$DOMAIN" \
  --ip 127.0.0.1 --http "127.0.0.1:$HTTP_PORT" --dns "127.0.0.1:$DNS_PORT" >"$WORK/oob.log" 2>&1 &
PIDS+=($!)

# The lab: /fetch?url=http://HOST/ calls HOST back on the OOB server and
# notes when the server answered.
cat >"$WORK/lab.py" <<'PY'
import http.client, http.server, sys, time, urllib.parse
oob_port, log = int(sys.argv[2]), open(sys.argv[3], "a", buffering=1)
class Lab(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        url = query.get("url", [""])[0]
        if url.startswith("http://"):
            host = url[len("http://"):].split("/")[0]
            conn = http.client.HTTPConnection("127.0.0.1", oob_port, timeout=5)
            conn.request("GET", "/", headers={"Host": host})
            conn.getresponse().read()
            log.write(f"{host} {time.time():.6f}\n")
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Lab).serve_forever()
PY
python3 "$WORK/lab.py" "$LAB_PORT" "$HTTP_PORT" "$WORK/callbacks.txt" &
PIDS+=($!)
for _ in $(seq 100); do
  curl -s -o /dev/null "http://127.0.0.1:$HTTP_PORT/" && curl -s -o /dev/null "http://127.0.0.1:$LAB_PORT/" && break
  sleep 0.1
done

mkdir -p "$WORK/templates"
{
  echo "id: oob-latency"
  echo "info: {name: OOB latency, severity: info}"
  echo "http:"
  echo "  - method: GET"
  echo "    path: ['{{BaseURL}}/fetch?n={{n}}&url=http://{{interactsh-url}}/']"
  echo "    payloads:"
  echo "      n: [$(seq -s, 1 "$CALLBACKS")]"
  echo "    matchers:"
  echo "      - type: word"
  echo "        part: interactsh_protocol"
  echo "        words: [http]"
} >"$WORK/templates/oob-latency.yaml"

"$TARGET/$PROFILE/scanfleet-scanner" run -t "$WORK/templates" -u "http://127.0.0.1:$LAB_PORT" \
  --allow-private --jsonl -iserver "http://127.0.0.1:$HTTP_PORT" --interactsh-domain "$DOMAIN" \
  --interactions-poll-duration "$POLL" --interactions-cooldown-period $((POLL * 3)) \
  >"$WORK/findings.jsonl" 2>"$WORK/scanner.log"

python3 - "$WORK/callbacks.txt" "$WORK/findings.jsonl" "$CALLBACKS" "$POLL" <<'PY'
import datetime, json, re, statistics, sys
callbacks = dict(line.split() for line in open(sys.argv[1]))
latencies = []
for line in open(sys.argv[2]):
    finding = json.loads(line)
    host = re.search(r"url=http://([^/]+)/", finding["matched_at"]).group(1)
    stamp = re.sub(r"(\.\d{6})\d+", r"\1", finding["timestamp"]).replace("Z", "+00:00")
    found = datetime.datetime.fromisoformat(stamp).timestamp()
    latencies.append(found - float(callbacks[host]))
latencies.sort()
n = len(latencies)
if n == 0:
    sys.exit("no findings")
p = lambda q: latencies[min(n - 1, int(q * n))]
print(f"callback-to-finding latency, poll {sys.argv[4]} s: {n} of {sys.argv[3]} callbacks found; "
      f"p50 {statistics.median(latencies)*1000:.0f} ms, p90 {p(0.9)*1000:.0f} ms, max {latencies[-1]*1000:.0f} ms")
PY
