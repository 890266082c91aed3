#!/usr/bin/env bash
# Makes sure Postgres and Redis are reachable for `make run` and `make test`,
# and prints `export` lines for DATABASE_URL and REDIS_URL to eval.
#
# Order of preference, for each service:
#   1. the URL already in the environment (DATABASE_URL / REDIS_URL);
#   2. a server answering on the default local port (5432 / 6379);
#   3. a private instance under .dev/, installed with apt-get when missing
#      (needs root) and started on ports 55432 / 56379.
# Postgres refuses to run as root, so the private cluster runs as `postgres`.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dev="$root/.dev"
log() { echo "dev-services: $*" >&2; }

answers() { # host port
  (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

apt_install() {
  if [ "$(id -u)" != 0 ]; then
    log "cannot install $* without root: install it, or set the service URL"
    exit 1
  fi
  log "installing $* with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq "$@" >&2
}

pg_bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  echo "$d"
}

wait_for() { # host port what
  for _ in $(seq 1 100); do
    answers "$1" "$2" && return 0
    sleep 0.1
  done
  log "$3 did not start on $1:$2"
  exit 1
}

# --- Postgres ---------------------------------------------------------------
if [ -n "${DATABASE_URL:-}" ]; then
  database_url="$DATABASE_URL"
elif answers 127.0.0.1 5432; then
  database_url="postgres://postgres@127.0.0.1:5432/scanfleet"
else
  bindir=$(pg_bindir)
  if [ -z "$bindir" ]; then
    apt_install postgresql
    bindir=$(pg_bindir)
  fi
  pgdata="$dev/pg"
  mkdir -p "$dev"
  if [ ! -f "$pgdata/PG_VERSION" ]; then
    log "initialising a private Postgres cluster in $pgdata"
    mkdir -p "$pgdata"
    if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$pgdata"; fi
    run_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
    run_pg "'$bindir/initdb' -D '$pgdata' -U postgres -A trust" >&2
  fi
  if ! answers 127.0.0.1 55432; then
    log "starting the private Postgres on port 55432"
    run_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
    run_pg "'$bindir/pg_ctl' -D '$pgdata' -l '$pgdata/server.log' -o '-p 55432 -k /tmp -c listen_addresses=127.0.0.1' -w start" >&2
  fi
  wait_for 127.0.0.1 55432 Postgres
  database_url="postgres://postgres@127.0.0.1:55432/scanfleet"
fi

# The service database itself (tests create their own next to it).
if command -v psql >/dev/null 2>&1; then
  admin_url="${database_url%/*}/postgres"
  if ! psql "$admin_url" -tAc "SELECT 1 FROM pg_database WHERE datname = 'scanfleet'" 2>/dev/null | grep -q 1; then
    psql "$admin_url" -qc "CREATE DATABASE scanfleet" >/dev/null 2>&1 || true
  fi
fi

# --- Redis ------------------------------------------------------------------
if [ -n "${REDIS_URL:-}" ]; then
  redis_url="$REDIS_URL"
elif answers 127.0.0.1 6379; then
  redis_url="redis://127.0.0.1:6379"
else
  command -v redis-server >/dev/null 2>&1 || apt_install redis-server
  if ! answers 127.0.0.1 56379; then
    mkdir -p "$dev/redis"
    log "starting a private Redis on port 56379"
    redis-server --daemonize yes --bind 127.0.0.1 --port 56379 --save "" --appendonly no \
      --dir "$dev/redis" --logfile "$dev/redis/redis.log" >&2
  fi
  wait_for 127.0.0.1 56379 Redis
  redis_url="redis://127.0.0.1:56379"
fi

echo "export DATABASE_URL='$database_url'"
echo "export REDIS_URL='$redis_url'"
