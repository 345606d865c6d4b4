# Shared by tools/demo, tools/test and tools/bench: packages, build, stack. Source it.
# shellcheck shell=bash

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# packages ROLE... — the Debian packages of those roles in tools/packages.txt, the one list.
packages() {
  local roles=" $* "
  awk -v roles="$roles" '!/^#/ && NF >= 2 && index(roles, " " $1 " ") { print $2 }' "$repo/tools/packages.txt"
}

# present PACKAGE — whether dpkg has it installed, or, for nodejs and npm, whether their command
# is on PATH: NodeSource's nodejs (or nvm's) brings npm with it and conflicts with Debian's npm
# package, and either serves the TypeScript client's suite.
present() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed" && return 0
  case "$1" in
    nodejs) command -v node > /dev/null ;;
    npm) command -v npm > /dev/null ;;
    *) return 1 ;;
  esac
}

# ensure_packages ROLE... — install what is missing of those roles (as root), or say what to
# install and exit 1. Works where /usr/sbin/policy-rc.d already exists (every Debian container
# image ships one) and leaves one it did not create alone.
ensure_packages() {
  local missing=() p
  for p in $(packages "$@"); do
    present "$p" || missing+=("$p")
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

# configure_build DIR [MESON SETUP OPTIONS...]: set it up, or, when the options differ from its last
# ones, configure it again. The default, tools/demo's and tools/test's build: -O1 with line tables
# (-g1), which builds in 370 s on two cores where -O2 -g took 570 (the whole of a fresh CI run's
# build, measured 2026-12-04); the benchmark and a real package (dpkg-buildpackage) build at -O2.
dev_build=(--buildtype=custom -Doptimization=1 -Ddebug=false -Dcpp_args=-g1)
configure_build() {
  local dir=$1
  shift
  [ $# -gt 0 ] || set -- "${dev_build[@]}"
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$repo" "$@" >&2
  elif [ "$(cat "$dir/outbox-setup-options" 2>/dev/null)" != "$*" ]; then
    meson configure "$dir" "$@" >&2
  fi
  echo "$*" > "$dir/outbox-setup-options"
}

# build DIR [MESON SETUP OPTIONS...]: configure, then build everything.
build() {
  local dir=${1:-$repo/build}
  shift || true
  configure_build "$dir" "$@"
  ninja -C "$dir" -j2 >&2
}
