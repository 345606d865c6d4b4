#!/usr/bin/env bash
# The TypeScript client's tests (meson suite "clients", run by tools/test): npm ci when the lock
# file is newer than what is installed, then the build (tsc) and node's test runner.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
command -v node > /dev/null || { echo "node is not installed (tools/test installs nodejs and npm)" >&2; exit 1; }
command -v npm > /dev/null || { echo "npm is not installed (tools/test installs nodejs and npm)" >&2; exit 1; }
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 18 ] || { echo "node $(node -v) is too old: the client needs Node 18 or newer" >&2; exit 1; }
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
npx tsc -p .
# The test files mostly wait (on the bridge, the servers, leases running out): four at a time where
# node can (20.10 and newer; each file names its own databases and streams). Node 18 runs them one
# at a time.
concurrency=()
if node --help | grep -q -- --test-concurrency; then concurrency=(--test-concurrency=4); fi
node --test "${concurrency[@]}" dist/test/*.test.js
