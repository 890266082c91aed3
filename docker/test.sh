#!/usr/bin/env bash
# `make test`: the whole test suite, with nextest when it is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
# The pipeline tests start the api, scanner and scheduler binaries.
cargo build --bins
if cargo nextest --version >/dev/null 2>&1; then
  exec cargo nextest run --workspace --no-fail-fast --retries 0
else
  exec cargo test --workspace --no-fail-fast
fi
