#!/usr/bin/env bash
# `make test`: the whole test suite, with nextest when it is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
# The report tests read the PDFs back with poppler (pdftotext, pdfinfo,
# pdffonts), as a reader would.
if ! command -v pdftotext >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "test: installing poppler-utils with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq poppler-utils >&2 \
      || { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq poppler-utils >&2; }
  else
    echo "test: the report tests need poppler-utils (pdftotext); install it" >&2
  fi
fi
# The Redis failure tests start, kill and restart private redis-server
# processes (Sentinel mode and a six-node cluster made with redis-cli
# included), whatever Redis REDIS_URL points at.
if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "test: installing redis-server with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >&2 \
      || { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >&2; }
  else
    echo "test: the Redis failure tests need redis-server; install it" >&2
  fi
fi
# The pipeline tests start the api, scanner and scheduler binaries.
cargo build --bins
if cargo nextest --version >/dev/null 2>&1; then
  exec cargo nextest run --workspace --no-fail-fast --retries 0
else
  exec cargo test --workspace --no-fail-fast
fi
