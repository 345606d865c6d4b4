#!/bin/bash
# The Go client's suite (tools/test, suite clients): go vet and go test of the module, offline
# (vendor.sh), in a copy of its own. The tests that need services use the stack's MariaDB and
# nats-server (OUTBOX_TEST_* of tools/stack's env file, as meson passes them): missing, they fail.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/outbox-go-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$here/vendor.sh" "$work/module"
export OUTBOX_REPO=${OUTBOX_REPO:-$(cd "$here/../.." && pwd)}  # tests/vectors
cd "$work/module"
export GOFLAGS=-mod=vendor GOPROXY=off GO111MODULE=on
unformatted=$(gofmt -l $(find . -path ./vendor -prune -o -name '*.go' -print))
if [ -n "$unformatted" ]; then
  echo "not gofmt'd: $unformatted" >&2
  exit 1
fi
go vet ./...
go test -p 1 -count=1 "$@" ./...
