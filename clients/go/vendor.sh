#!/bin/bash
# vendor.sh DEST — a copy of this module in DEST with a vendor/ directory assembled from Debian's
# Go source tree (/usr/share/gocode/src; the golang-*-dev packages of tools/packages.txt), so
# that `go build -mod=vendor` and `go test -mod=vendor` need no network. The versions are go.mod's:
# a user outside gets the same libraries with `go get`. Nothing is written into the checkout.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dest=$1
gocode=${OUTBOX_GOCODE:-/usr/share/gocode/src}
rm -rf "$dest"
mkdir -p "$dest"
# The module's own files (a vendor/ left in the checkout by hand is not copied).
tar -C "$here" --exclude=./vendor -cf - . | tar -C "$dest" -xf -
modules=$dest/vendor/modules.txt
mkdir -p "$dest/vendor"
: > "$modules"
# Every module go.mod requires, direct and indirect: "path version".
awk '/^require \(/{block=1; next} block && /^\)/{block=0} block && NF>=2 {print $1, $2} /^require [^(]/{print $2, $3}' \
  "$dest/go.mod" | while read -r path version; do
  src=$gocode/$path
  if [ ! -d "$src" ]; then
    echo "vendor.sh: $path ($version) is not in $gocode: install its golang-*-dev package (tools/packages.txt)" >&2
    exit 1
  fi
  mkdir -p "$dest/vendor/$path"
  # Its Go files, without tests, test data and commands: what a build of this module compiles.
  (cd "$src" && find -L . \( -name testdata -o -name test -o -name bench -o -name examples \) -prune -o \
      \( -name '*.go' ! -name '*_test.go' -o -name '*.s' -o -name 'LICENSE*' -o -name go.mod \) -print) |
    while read -r f; do
      mkdir -p "$dest/vendor/$path/$(dirname "$f")"
      cp -L "$src/$f" "$dest/vendor/$path/$f"
    done
  echo "# $path $version" >> "$modules"
  goversion=$(awk '/^go /{print $2; exit}' "$src/go.mod" 2>/dev/null || true)
  echo "## explicit${goversion:+; go $goversion}" >> "$modules"
  # Its packages: the directories holding Go files, package main aside.
  (cd "$dest/vendor/$path" && find . -name '*.go' -printf '%h\n' | sort -u) | while read -r dir; do
    grep -qs '^package main$' "$dest/vendor/$path/$dir"/*.go && continue
    echo "$path${dir#.}" >> "$modules"
  done
done
