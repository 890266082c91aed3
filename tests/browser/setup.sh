#!/usr/bin/env bash
# The browser tests' tools (issue 33), installed when missing, quietly, and
# nothing done when all are there:
#   - Debian's `chromium` (apt-get, as root): no browser download of
#     Playwright's own is possible here, so the tests launch this one;
#   - Playwright for Python at the version of requirements.txt (pip); never
#     `playwright install`;
#   - axe-core from npm into tests/browser/.cache (gitignored), injected into
#     the pages by the test, never vendored in the tree.
# Without root, a missing Chromium is reported and left out: the Rust test
# then says it skipped the browser walk, and why.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="$here/.cache"
axe_version="4.14.1"
log() { echo "browser-setup: $*" >&2; }

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "$@" >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq "$@" >/dev/null 2>&1; }
}

if ! [ -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ]; then
    log "installing chromium with apt-get"
    apt_install chromium
  else
    log "chromium is missing and installing it needs root: the browser tests will be skipped"
  fi
fi

want_pw="$(sed -n 's/^playwright==//p' "$here/requirements.txt")"
have_pw="$(python3 -c 'import importlib.metadata as m; print(m.version("playwright"))' 2>/dev/null || true)"
if [ "$have_pw" != "$want_pw" ]; then
  log "installing playwright==$want_pw with pip"
  python3 -m pip install -q --disable-pip-version-check -r "$here/requirements.txt" >&2
fi

axe="$cache/node_modules/axe-core/axe.min.js"
have_axe="$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$cache/node_modules/axe-core/package.json" 2>/dev/null | head -1 || true)"
if ! [ -s "$axe" ] || [ "$have_axe" != "$axe_version" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
      log "installing npm with apt-get"
      apt_install npm
    else
      log "npm is missing: cannot install axe-core"
      exit 1
    fi
  fi
  log "installing axe-core@$axe_version with npm into $cache"
  mkdir -p "$cache"
  npm install --prefix "$cache" --no-save --no-audit --no-fund --silent \
    "axe-core@$axe_version" >&2
  [ -s "$axe" ] || { log "axe-core did not install ($axe missing)"; exit 1; }
fi
