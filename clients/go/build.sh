#!/bin/bash
# build.sh OUT — builds the consumer's command line (cmd/outbox-replica) to the path OUT, offline:
# the libraries from Debian's Go source tree (vendor.sh; the golang-*-dev packages of
# tools/packages.txt), in a copy of the module of its own (two builds at once do not meet).
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 OUT" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(realpath -m "$1")
work=$(mktemp -d "${TMPDIR:-/tmp}/outbox-go-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$here/vendor.sh" "$work/module"
mkdir -p "$(dirname "$out")"
cd "$work/module"
GOFLAGS=-mod=vendor GOPROXY=off GO111MODULE=on go build -trimpath -o "$out" ./cmd/outbox-replica
