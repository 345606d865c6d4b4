# Shared by tools/demo, tools/test and tools/bench: packages, build, stack. Source it.
# shellcheck shell=bash

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# packages ROLE... — the Debian packages of those roles in tools/packages.txt, the one list.
packages() {
  local roles=" $* "
  awk -v roles="$roles" '!/^#/ && NF >= 2 && index(roles, " " $1 " ") { print $2 }' "$repo/tools/packages.txt"
}

# ensure_packages ROLE... — install what is missing of those roles (as root), or say what to
# install and exit 1. Works where /usr/sbin/policy-rc.d already exists (every Debian container
# image ships one) and leaves one it did not create alone.
ensure_packages() {
  local missing=() p
  for p in $(packages "$@"); do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "missing packages: ${missing[*]}" >&2
    echo "install them with: sudo apt-get update && sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || { echo "error: apt-get update failed" >&2; exit 1; }
  # Keep the packaged mariadb/nats/prometheus services from starting: tools/stack runs private
  # ones. A policy-rc.d that was already there stays as it was. (OUTBOX_POLICY_RC_D: for tests.)
  local policy=${OUTBOX_POLICY_RC_D:-/usr/sbin/policy-rc.d} created=0 status=0
  if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; created=1; fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 || status=$?
  if [ "$created" = 1 ]; then rm -f "$policy"; fi
  if [ "$status" != 0 ]; then
    echo "error: apt-get install ${missing[*]} failed (exit $status)" >&2
    exit 1
  fi
}

# build DIR [MESON SETUP OPTIONS...] (default: --buildtype=debugoptimized)
build() {
  local dir=${1:-$repo/build}
  shift || true
  [ $# -gt 0 ] || set -- --buildtype=debugoptimized
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$repo" "$@" >&2
  fi
  ninja -C "$dir" -j2 >&2
}
