#!/usr/bin/env bash
# The dashboard in a real browser: starts dpgate on a temporary database,
# then drives Debian's chromium headless with playwright-core (from the npm
# registry, pinned, installed once into a cache outside the clone) through
# dashboard_test.js.  Screenshots go to OUTDIR.
#
#   run_browser.sh DPGATE OUTDIR
#   run_browser.sh --install-only     (playwright-core into the cache, no test)
#
# Skips (exit 77, said loudly) only when chromium is not installed; CI
# installs it (.ci/install-deps), so there the test runs.  No node, or npm
# failing to install playwright-core, fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
chromium=${DPGATE_CHROMIUM:-/usr/bin/chromium}
playwright_version=1.65.1
cache=${DPGATE_BROWSER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dpgate-browser}

install_driver() {
  local want="playwright-core@$playwright_version"
  if [ "$(cat "$cache/installed" 2>/dev/null)" != "$want" ]; then
    mkdir -p "$cache"
    printf '{"name":"dpgate-browser-test","private":true}\n' >"$cache/package.json"
    npm install --prefix "$cache" --no-audit --no-fund --ignore-scripts --save-exact "$want" >&2
    echo "$want" >"$cache/installed"
  fi
}

if [ "${1:-}" = "--install-only" ]; then
  install_driver
  exit 0
fi
dpgate=$1
outdir=$2
if [ ! -x "$chromium" ]; then
  echo "SKIPPED: the browser test needs chromium at $chromium (apt-get install chromium)" >&2
  exit 77
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "browser test: node and npm are required (apt-get install nodejs npm)" >&2
  exit 1
fi
install_driver

tmp=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
key=$("$dpgate" keys create --db "$tmp/db" --role admin 2>/dev/null)
"$dpgate" serve --db "$tmp/db" --data-dir "$tmp/data" --listen 127.0.0.1:0 --quiet 2>"$tmp/log" &
pid=$!
url=
for _ in $(seq 100); do
  url=$(grep -o '"url":"http://[^"]*"' "$tmp/log" | head -1 | cut -d'"' -f4 || true)
  [ -n "$url" ] && break
  sleep 0.1
done
if [ -z "$url" ]; then
  echo "browser test: dpgate did not start:" >&2
  cat "$tmp/log" >&2
  exit 1
fi
mkdir -p "$outdir"
PLAYWRIGHT_CORE="$cache/node_modules/playwright-core" DPGATE_URL="$url" DPGATE_KEY="$key" \
  DPGATE_CHROMIUM="$chromium" DPGATE_SHOTS="$outdir" \
  node "$here/dashboard_test.js"
