#!/usr/bin/env bash
# `make run`: starts the api, the scheduler and one scanner node in the
# foreground against the services chosen by dev-services.sh; Ctrl-C (or
# SIGTERM) stops everything it started.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/target/release"
pids=()
stop() {
  trap - INT TERM EXIT
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait || true
}
trap stop INT TERM EXIT
"$bin/scanfleet-api" & pids+=($!)
"$bin/scanfleet-scheduler" & pids+=($!)
"$bin/scanfleet-scanner" worker & pids+=($!)
echo "scanfleet: api on http://${SCANFLEET_API__BIND:-127.0.0.1:8080} (docs at /api/v1/docs); Ctrl-C stops all" >&2
# Any one of them exiting brings the others down too.
wait -n
