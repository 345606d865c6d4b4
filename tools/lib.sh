# Shared by tools/demo, tools/test and tools/bench: packages, build, stack. Source it.
# shellcheck shell=bash

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Every Debian package the build, the stack and the tests need (DEVELOPERS.md lists why).
packages=(
  g++ meson ninja-build pkg-config python3 curl
  libnats-dev nats-server mariadb-server mariadb-client libmariadb-dev
  libsimdjson-dev libfmt-dev libspdlog-dev libtomlplusplus-dev libcli11-dev libssl-dev libjemalloc-dev
  libboost-test-dev
)

ensure_packages() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" = 0 ]; then
    echo "installing: ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    # Keep the packaged mariadb/nats services from starting: tools/stack runs private ones.
    local policy=/usr/sbin/policy-rc.d created=0
    if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; created=1; fi
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
    [ "$created" = 1 ] && rm -f "$policy"
  else
    echo "missing packages: ${missing[*]}" >&2
    echo "install them with: sudo apt-get update && sudo apt-get install ${missing[*]}" >&2
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
