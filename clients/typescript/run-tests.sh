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
# The test files mostly wait (on the bridge, the servers, leases running out): three at a time where
# node can (20.10 and newer; each file names its own databases and streams), then, alone, those
# that compare times, count what happened in a span of time, or hold a lease of seconds (beside
# the others on a busy machine they failed: a spooled download against a direct one, summaries
# read a 3-second interval, a pod that never caught up within 30 s). Node 18 runs every file one
# at a time.
alone=(dist/test/spool.test.js dist/test/verify_cost.test.js dist/test/lease.test.js)
together=()
for f in dist/test/*.test.js; do
  case " ${alone[*]} " in *" $f "*) ;; *) together+=("$f") ;; esac
done
if node --help | grep -q -- --test-concurrency; then
  rc=0
  node --test --test-concurrency=3 "${together[@]}" || rc=$?
  node --test "${alone[@]}" || rc=$?
  exit "$rc"
fi
node --test dist/test/*.test.js
