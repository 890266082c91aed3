#!/usr/bin/env bash
# For Docker hosts that cannot reach an image registry: builds local
# stand-ins for the base images that docker/Dockerfile and
# docker/docker-compose.yml name, from Debian packages only, and tags them
# with those names. Where a registry is reachable, skip this script: the real
# images are pulled as usual.
#
#   debian:bookworm-slim   debootstrap --variant=minbase bookworm, imported
#   rust:1.95-bookworm     the above + gcc + this host's Rust toolchain and
#                          the extra CA certificates this host trusts (from
#                          /usr/local/share/ca-certificates, e.g. an egress
#                          proxy's), so that cargo reaches crates.io as the
#                          host does
#   postgres:16            the above + Debian's PostgreSQL (15), with an
#                          entrypoint that honours POSTGRES_USER,
#                          POSTGRES_PASSWORD, POSTGRES_DB and PGDATA like the
#                          official image
#   redis:7                the above + Debian's redis-server (7.0)
#
# Needs root, debootstrap and a running dockerd. Images that already exist
# are kept; FORCE=1 rebuilds them.
#   DEBIAN_MIRROR   (default http://deb.debian.org/debian)
#   RUST_TOOLCHAIN  toolchain directory to copy (default: the active one)
set -euo pipefail
cd "$(dirname "$0")"

mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
runtime="${RUNTIME_IMAGE:-debian:bookworm-slim}"
rust_image="${RUST_IMAGE:-rust:1.95-bookworm}"
pg_image="${POSTGRES_IMAGE:-postgres:16}"
redis_image="${REDIS_IMAGE:-redis:7}"

have() { [ "${FORCE:-0}" != 1 ] && docker image inspect "$1" >/dev/null 2>&1; }
say() { echo "local-images: $*" >&2; }

if have "$runtime"; then
  say "$runtime exists"
else
  command -v debootstrap >/dev/null || apt-get install -y debootstrap
  root=$(mktemp -d /var/tmp/scanfleet-rootfs.XXXXXX)
  trap 'rm -rf "$root"' EXIT
  say "debootstrap bookworm from $mirror"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >/dev/null
  printf 'deb %s bookworm main\ndeb %s bookworm-updates main\n' "$mirror" "$mirror" \
    > "$root/etc/apt/sources.list"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' - "$runtime" >/dev/null
  rm -rf "$root"
  trap - EXIT
  say "tagged $runtime"
fi

# Builds image $1 from the Dockerfile text on stdin, with context dir $2.
build() {
  local tag=$1 ctx=$2
  docker build -q -t "$tag" -f - "$ctx" >/dev/null
  say "tagged $tag"
}

if have "$rust_image"; then
  say "$rust_image exists"
else
  toolchain="${RUST_TOOLCHAIN:-$(rustc --print sysroot)}"
  ctx=$(mktemp -d /var/tmp/scanfleet-rust.XXXXXX)
  cp -a "$toolchain" "$ctx/toolchain"
  mkdir "$ctx/ca"
  cp /usr/local/share/ca-certificates/*.crt "$ctx/ca/" 2>/dev/null || true
  build "$rust_image" "$ctx" <<EOF
FROM $runtime
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null
COPY toolchain /usr/local/rust
ENV PATH=/usr/local/rust/bin:/usr/local/cargo/bin:\$PATH CARGO_HOME=/usr/local/cargo
RUN cargo --version && rustc --version
EOF
  rm -rf "$ctx"
fi

if have "$pg_image"; then
  say "$pg_image exists"
else
  ctx=$(mktemp -d /var/tmp/scanfleet-pg.XXXXXX)
  cat > "$ctx/entrypoint.sh" <<'EOF'
#!/bin/sh
# Stand-in for the official postgres image's entrypoint: initialises PGDATA
# on first start with POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB,
# password authentication for every network client, then runs postgres.
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
if [ -z "${POSTGRES_PASSWORD:-}" ]; then
  echo "POSTGRES_PASSWORD is not set" >&2; exit 1
fi
mkdir -p "$PGDATA" /run/postgresql
chown -R postgres:postgres "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp); printf '%s' "$POSTGRES_PASSWORD" > "$pwfile"; chown postgres "$pwfile"
  su postgres -s /bin/sh -c "initdb -D '$PGDATA' -U '$POSTGRES_USER' --pwfile='$pwfile' --auth-local=trust --auth-host=scram-sha-256" >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  su postgres -s /bin/sh -c "pg_ctl -D '$PGDATA' -o '-c listen_addresses=' -w start" >/dev/null
  if [ "$POSTGRES_DB" != postgres ]; then
    su postgres -s /bin/sh -c "psql -U '$POSTGRES_USER' -d postgres -qc 'CREATE DATABASE \"$POSTGRES_DB\"'"
  fi
  su postgres -s /bin/sh -c "pg_ctl -D '$PGDATA' -m fast -w stop" >/dev/null
fi
exec su postgres -s /bin/sh -c "exec postgres -D '$PGDATA' -c listen_addresses='*'"
EOF
  chmod +x "$ctx/entrypoint.sh"
  build "$pg_image" "$ctx" <<EOF
FROM $runtime
RUN apt-get update && apt-get install -y --no-install-recommends postgresql \
 && rm -rf /var/lib/apt/lists/*
ENV PATH=/usr/lib/postgresql/15/bin:\$PATH PGDATA=/var/lib/postgresql/data
COPY entrypoint.sh /usr/local/bin/docker-entrypoint.sh
VOLUME /var/lib/postgresql/data
EXPOSE 5432
ENTRYPOINT ["docker-entrypoint.sh"]
EOF
  rm -rf "$ctx"
fi

if have "$redis_image"; then
  say "$redis_image exists"
else
  ctx=$(mktemp -d /var/tmp/scanfleet-redis.XXXXXX)
  build "$redis_image" "$ctx" <<EOF
FROM $runtime
RUN apt-get update && apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/* && mkdir -p /data && chown redis:redis /data
WORKDIR /data
USER redis
EXPOSE 6379
CMD ["redis-server", "--protected-mode", "no"]
EOF
  rm -rf "$ctx"
fi
