#!/usr/bin/env bash
# Empties a SwiftPM scratch directory that builds GrandCentral as a local (path) package
# when the library's list of source files has changed since that scratch was last used.
# SwiftPM reuses a scratch's build plan and does not notice files added to a path
# dependency ("cannot find 'X' in scope" for a type in a new file); starting afresh does.
#
#   scripts/fresh-scratch.sh SCRATCH_DIR
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 SCRATCH_DIR" >&2; exit 64; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
listing=$(cd "$root" && find Sources Package.swift -type f | LC_ALL=C sort | md5sum)
if [ "$(cat "$1/.grandcentral-sources" 2>/dev/null)" != "$listing" ]; then
    rm -rf "$1"
    mkdir -p "$1"
    printf '%s\n' "$listing" >"$1/.grandcentral-sources"
fi
