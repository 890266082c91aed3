#!/usr/bin/env bash
# `make run`: starts the api, the scheduler and scanner nodes in the
# foreground against the services chosen by dev-services.sh; Ctrl-C (or
# SIGTERM) stops everything it started.
set -euo pipefail
# SCANFLEET_NODES scanner nodes (1 unless set), each a process of its own
# as on separate machines.
nodes="${SCANFLEET_NODES:-1}"
case "$nodes" in
  '' | *[!0-9]*) nodes=0 ;;
esac
if [ "$nodes" -lt 1 ]; then
  echo "scanfleet: SCANFLEET_NODES must be a whole number of 1 or more, not '${SCANFLEET_NODES}'" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${CARGO_TARGET_DIR:-$root/target}/release"
pids=()
stop() {
  trap - INT TERM EXIT
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait || true
}
trap stop INT TERM EXIT

# A lab site to scan on this machine: `lab.scanfleet.test` (and
# `www.lab.scanfleet.test`) answer from 127.0.0.1, with a deliberately
# exposed .git/config and two blind weaknesses that call back to
# scanfleet-oob, started here on loopback; the stack lab's hosts
# (docker/lab/stacks.json: wordpress.stack.test, nginx.stack.test...)
# answer from the same site by Host. Scanner settings the caller set are
# left alone.
lab_port="${SCANFLEET_LAB_PORT:-8081}"
if [ "${SCANFLEET_LAB:-on}" != off ]; then
  site="$root/.dev/lab"
  mkdir -p "$site/.git"
  cat > "$site/index.html" <<'HTML'
<!doctype html><html><head><title>scanfleet lab</title></head>
<body><h1>Lab shop</h1><p>Also see <a href="http://www.lab.scanfleet.test/">www</a>.</p></body></html>
HTML
  printf '[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n[remote "origin"]\n\turl = https://git.lab.scanfleet.test/shop.git\n' > "$site/.git/config"
  # The out-of-band server, on loopback, for the lab's blind weaknesses
  # (/fetch?url=, /lookup?host=): its own Redis prefix, the lab's zone.
  oob_http="127.0.0.1:${SCANFLEET_LAB_OOB_HTTP_PORT:-8082}"
  oob_dns="127.0.0.1:${SCANFLEET_LAB_OOB_DNS_PORT:-8053}"
  oob_domain="oob.lab.scanfleet.test"
  SCANFLEET_REDIS_PREFIX="${SCANFLEET_REDIS_PREFIX:-scanfleet}-lab-oob" "$bin/scanfleet-oob" \
    --domain "$oob_domain" --ip 127.0.0.1 --http "$oob_http" --dns "$oob_dns" & pids+=($!)
  python3 "$root/docker/lab/lab_site.py" --bind 127.0.0.1 --port "$lab_port" --directory "$site" \
    --oob-http "$oob_http" --oob-dns "$oob_dns" >/dev/null 2>&1 & pids+=($!)
  export SCANFLEET_SCANNER__INTERACTSH_SERVER="${SCANFLEET_SCANNER__INTERACTSH_SERVER:-http://$oob_http}"
  export SCANFLEET_SCANNER__INTERACTSH_DOMAIN="${SCANFLEET_SCANNER__INTERACTSH_DOMAIN:-$oob_domain}"
  # The built-in pack plus the lab's out-of-band templates.
  rm -rf "$root/.dev/templates" && mkdir -p "$root/.dev/templates"
  cp -r "$root/scanner/engine/templates" "$root/.dev/templates/pack"
  cp -r "$root/docker/lab/oob-templates" "$root/.dev/templates/oob"
  # The corpus templates the stack lab's known findings are found with,
  # when the public corpus is beside the checkout.
  corpus="${SCANFLEET_CORPUS:-$root/../shared/corpus/nuclei-templates/http}"
  if [ -d "$corpus" ]; then
    "$root/docker/lab/stacks.py" templates "$corpus" "$root/.dev/templates/stacks/http"
  fi
  export SCANFLEET_SCANNER__TEMPLATES_DIR="${SCANFLEET_SCANNER__TEMPLATES_DIR:-$root/.dev/templates}"
  lab_names="lab.scanfleet.test www.lab.scanfleet.test $("$root/docker/lab/stacks.py" hosts | tr '\n' ' ')"
  hosts=""; connect=""
  for n in $lab_names; do
    hosts="${hosts:+$hosts,}$n=127.0.0.1"
    connect="${connect:+$connect,}$n:80:127.0.0.1:$lab_port,$n:443:127.0.0.1:9"
  done
  export SCANFLEET_SCANNER__HOSTS="${SCANFLEET_SCANNER__HOSTS:-$hosts}"
  export SCANFLEET_SCANNER__CONNECT_TO="${SCANFLEET_SCANNER__CONNECT_TO:-$connect}"
  # The lab lives on loopback, which scans may not reach otherwise.
  export SCANFLEET_SCANNER__ALLOW_PRIVATE="${SCANFLEET_SCANNER__ALLOW_PRIVATE:-true}"
  echo "scanfleet: lab site lab.scanfleet.test (and the stack lab's *.stack.test hosts) served on 127.0.0.1:$lab_port, its OOB server scanfleet-oob on $oob_http (DNS $oob_dns, zone $oob_domain) (SCANFLEET_LAB=off to skip)" >&2
fi

# Webhook receivers of a local walk live on loopback too (dev mode only:
# production always requires https and public addresses).
export SCANFLEET_WEBHOOKS__ALLOW_PRIVATE="${SCANFLEET_WEBHOOKS__ALLOW_PRIVATE:-true}"

"$bin/scanfleet-api" & pids+=($!)
"$bin/scanfleet-scheduler" & pids+=($!)
# Everything started so far is needed by the rest; a scanner node is not:
# one drained (`POST /api/v1/admin/nodes/{id}/drain`) leaves, and the
# others, the queue and the api go on.
needed=("${pids[@]}")
# With more than one, each is told apart in the node list by its number
# (`HOSTNAME` names a node there, beside a random suffix).
host="${HOSTNAME:-$(hostname)}"
for i in $(seq 1 "$nodes"); do
  name="$host"
  [ "$nodes" -gt 1 ] && name="$host-$i"
  HOSTNAME="$name" "$bin/scanfleet-scanner" worker & pids+=($!)
done
addr="${SCANFLEET_API__BIND:-127.0.0.1:8080}"
echo "scanfleet: web console on http://$addr/ (register there, or sign in); api on http://$addr/api/v1 (docs at /api/v1/docs); Ctrl-C stops all" >&2
# Any needed one exiting brings the others down too.
wait -n "${needed[@]}"
