#!/usr/bin/env bash
# Installs the system packages GrandCentral's build needs, and only those that are
# missing. Silent when everything is already there, so `make` can call it every time.
#
#   cmake, ninja-build     the C-facing build (CMakeLists.txt)
#   pkg-config             how examples and C users find the library
#   libblocksruntime-dev   Debian's BlocksRuntime: the one libBlocksRuntime.so.0 that the
#                          library and the programs linking it share (DESIGN.md, rule 3)
#   libbsd-dev             BSD helpers the engine may use (strlcpy, reallocarray, …)
#   g++                    the header matrix compiles <dispatch/dispatch.h> as C++17 with g++,
#                          and brings the libstdc++ the toolchain's clang++ links against
#   mandoc, groff-base     scripts/check-manpages.sh lints the man pages with both
#   man-db                 scripts/check-manpages.sh asks `man -w` where each page is
#
# The Swift toolchain itself (/opt/swift) and gcc/make are expected to be present already.
# Needs root, or sudo. Runs non-interactively (CI has no stdin).
set -euo pipefail

packages=(cmake ninja-build pkg-config libblocksruntime-dev libbsd-dev g++ mandoc groff-base man-db)

installed() {
    [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: this script knows Debian/Ubuntu (apt) only." >&2
    echo "install-deps: install these yourself: ${packages[*]}" >&2
    exit 1
fi

missing=()
for p in "${packages[@]}"; do
    installed "$p" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
else
    echo "install-deps: missing ${missing[*]}, and this needs root (or sudo) to install them." >&2
    exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" </dev/null
echo "install-deps: done"
