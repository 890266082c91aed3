#!/usr/bin/env bash
# A short fuzz run of every cargo-fuzz target (fuzz/), starting from the
# committed seeds: a regression net, not a search. The long runs are
# described in docs/scanner.md, "Fuzzing".
#
# FUZZ_SECONDS sets the time per target (default 15). Needs nightly and
# cargo-fuzz; both are installed when missing.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${FUZZ_SECONDS:-15}"
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
target_dir="${CARGO_TARGET_DIR:-$PWD/target}/fuzz"
# No sanitizer: the scanner is safe Rust, so AddressSanitizer would mostly
# halve the executions; overflow checks and debug assertions stay on.
cargo +nightly fuzz build -s none --target-dir "$target_dir"
for target in $(cargo +nightly fuzz list); do
  corpus=$(mktemp -d)
  log="$corpus.log"
  echo "== fuzz $target (${seconds}s)"
  if ! cargo +nightly fuzz run -s none --target-dir "$target_dir" "$target" "$corpus" "seeds/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz target $target failed; the input is under fuzz/artifacts/$target/" >&2
    exit 1
  fi
  grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" || true
  rm -rf "$corpus" "$log"
done
