#!/usr/bin/env bash
# `make compose-test`: the whole compose stack for real, as root with a
# running dockerd. Builds the image, starts postgres, redis, api, scheduler,
# a scanner and a lab site; runs a scan of the lab end to end through the
# api; scans each host of the stack lab (lab/stacks.json, served by the same
# lab container by Host) with the `auto` engine and checks its known
# findings; scales to three scanner nodes and runs three more scans; then
# `down -v`. Base images missing locally are pulled, or where no registry
# answers, built by docker/local-images.sh.
set -euo pipefail
cd "$(dirname "$0")"

compose=(docker-compose)
docker compose version >/dev/null 2>&1 && compose=(docker compose)
project="scanfleet-test-$$"
port="${SCANFLEET_TEST_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
work=$(mktemp -d)
export SCANFLEET_ENV_FILE="$work/scanfleet.env" SCANFLEET_PORT="$port"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# The OOB server's published ports: free ones, not 53 and 80.
export SCANFLEET_OOB_DNS_PORT="$(free_port)" SCANFLEET_OOB_HTTP_PORT="$(free_port)"
# The corpus templates the stack lab's known findings are found with,
# copied out of the public corpus (SCANFLEET_CORPUS: its http/ directory)
# for the scanners to mount; without the corpus the stack scans are skipped.
corpus="${SCANFLEET_CORPUS:-../../shared/corpus/nuclei-templates/http}"
[ -d "$corpus" ] || corpus=/work/shared/corpus/nuclei-templates/http
export SCANFLEET_STACK_TEMPLATES="$work/stack-templates"
mkdir -p "$SCANFLEET_STACK_TEMPLATES/http"
stack_hosts=$(lab/stacks.py hosts)
SCANFLEET_STACK_HOSTS_MAP=$(for h in $stack_hosts; do printf ',%s=172.30.77.10' "$h"; done)
export SCANFLEET_STACK_HOSTS_MAP
if [ -d "$corpus" ]; then
  lab/stacks.py templates "$corpus" "$SCANFLEET_STACK_TEMPLATES/http"
else
  echo "== no template corpus at $corpus: the stack lab's hosts are not scanned"
  stack_hosts=
fi
chmod -R a+rX "$SCANFLEET_STACK_TEMPLATES"
dc() { "${compose[@]}" -p "$project" -f docker-compose.yml -f compose.test.yml --profile oob "$@"; }
cleanup() {
  status=$?
  if [ $status -ne 0 ]; then
    echo "== logs (failed with $status)"
    dc logs --no-color --tail 60 || true
  fi
  dc down -v --remove-orphans >/dev/null 2>&1 || true
  rm -rf "$work"
  exit $status
}
trap cleanup EXIT

for image in "${RUNTIME_IMAGE:-debian:bookworm-slim}" "${RUST_IMAGE:-rust:1.95-bookworm}" \
  "${POSTGRES_IMAGE:-postgres:16}" "${REDIS_IMAGE:-redis:7}"; do
  if ! docker image inspect "$image" >/dev/null 2>&1 &&
    ! timeout 60 docker pull -q "$image" >/dev/null 2>&1; then
    echo "== $image cannot be pulled: building local stand-ins"
    ./local-images.sh
    break
  fi
done

rand() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
pg_pw=$(rand) redis_pw=$(rand) admin_pw=$(rand)
cat > "$SCANFLEET_ENV_FILE" <<EOF
POSTGRES_USER=scanfleet
POSTGRES_PASSWORD=$pg_pw
POSTGRES_DB=scanfleet
DATABASE_URL=postgres://scanfleet:$pg_pw@postgres:5432/scanfleet
REDIS_PASSWORD=$redis_pw
REDIS_URL=redis://:$redis_pw@redis:6379
SCANFLEET_MODE=production
SCANFLEET_JWT_SECRET=$(rand)
SCANFLEET_LOG_FORMAT=json
SCANFLEET_ADMIN_EMAIL=admin@compose.test
SCANFLEET_ADMIN_PASSWORD=$admin_pw
EOF

echo "== docker-compose build, up"
start=$(date +%s)
# Build first: only the api names the build, and the services that share
# its image (scheduler, scanner, oob) would otherwise be pulled by
# docker-compose v1 before the image exists.
dc build
dc up -d
base="http://127.0.0.1:$port"
for _ in $(seq 1 120); do
  curl -fsS "$base/readyz" >/dev/null 2>&1 && break
  sleep 1
done
curl -fsS "$base/readyz"
echo
echo "   stack ready after $(($(date +%s) - start)) s"
dc ps

json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
api() { # METHOD PATH [BODY] with the current token
  curl -fsS -X "$1" "$base/api/v1$2" -H "authorization: Bearer $token" \
    -H 'content-type: application/json' ${3:+-d "$3"}
}

token=$(curl -fsS -XPOST "$base/api/v1/auth/login" -H 'content-type: application/json' \
  -d "{\"email\":\"admin@compose.test\",\"password\":\"$admin_pw\"}" | json 'd["access_token"]')
target=$(api POST /targets '{"domain":"lab.scanfleet.test","organization":"Compose test"}' | json 'd["id"]')
# Production mode requires proof of ownership before a scan; the lab cannot
# publish one on a name that only the scanners know, so the admin vouches.
api GET "/targets/$target" | json 'd["verification"]["status"]' | grep -qx unverified
api PATCH "/admin/targets/$target" '{"verified":true}' | json 'd["verification"]["method"]' | grep -qx admin

# Starts a scan of the lab and waits for it to finish; prints id, status
# and finding ids.
scan_lab() {
  local id status
  id=$(api POST /scans "{\"target_id\":\"$target\",\"engine\":\"quick\"}" | json 'd["id"]')
  for _ in $(seq 1 180); do
    status=$(api GET "/scans/$id" | json 'd["status"]')
    case $status in completed|failed|stopped) break ;; esac
    sleep 1
  done
  echo "   scan $id: $status, findings: $(api GET "/scans/$id" |
    json '",".join(sorted({f["title"] for f in d["findings"]}))')"
  [ "$status" = completed ]
}

echo "== a scan through the stack (with the lab's out-of-band finding)"
scan_lab | tee "$work/first-scan"
grep -q 'Blind SSRF through a url parameter' "$work/first-scan"

# Scans one host of the stack lab with `auto` and checks that every known
# finding of lab/stacks.json is there (the built-in pack, loaded beside the
# corpus templates, may find more: listed, not failed).
scan_stack() {
  local host=$1 target id status
  target=$(api POST /targets "{\"domain\":\"$host\",\"organization\":\"Compose test\"}" | json 'd["id"]')
  api PATCH "/admin/targets/$target" '{"verified":true}' >/dev/null
  id=$(api POST /scans "{\"target_id\":\"$target\",\"engine\":\"auto\"}" | json 'd["id"]')
  for _ in $(seq 1 300); do
    status=$(api GET "/scans/$id" | json 'd["status"]')
    case $status in completed|failed|stopped) break ;; esac
    sleep 1
  done
  api GET "/scans/$id" | lab/stacks.py check "$host" "$status"
}

if [ -n "$stack_hosts" ]; then
  echo "== the stack lab's hosts, each scanned with auto"
  for host in $stack_hosts; do scan_stack "$host"; done
fi

echo "== --scale scanner=3"
dc up -d --scale scanner=3 --no-recreate
sleep 3
nodes=$(dc ps -q scanner | wc -l)
echo "   scanner containers: $nodes"
[ "$nodes" -eq 3 ]
for _ in 1 2 3; do scan_lab & done
wait
echo "== scanner nodes that ran scans"
dc logs --no-color scanner | grep 'scan finished' | cut -d' ' -f1 | sort | uniq -c

echo "== docker-compose down -v"
dc down -v --remove-orphans
docker volume ls -q | grep -c "^${project}_" && exit 1
echo "compose test: OK"
