#!/usr/bin/env bash
# Checks that libgrandcentral.so exports libdispatch's names and nothing else (DESIGN.md,
# hard rule 4). Every symbol `nm -D --defined-only` lists must be one of:
#   - a function (T) named dispatch_*, declared in GrandCentral's public headers;
#   - a data symbol (B, D or R) named _dispatch_*, which libdispatch's own headers refer to
#     (by name, or through DISPATCH_SOURCE_TYPE_DECL(x) for _dispatch_source_type_x).
# and, when the toolchain's libdispatch.so is there to compare with, every name must be
# one it exports too (a name libdispatch does not have is not a libdispatch name).
# Anything else fails: an internal name (gc_*, a Swift symbol, a TLS variable), a local
# symbol that still sits in the dynamic symbol table, a data symbol libdispatch does not
# have. The linker's version script (cmake/exports.map) is what keeps the list short; this
# script is what notices when it does not.
#
#   scripts/check-exports.sh LIBRARY INCLUDE_DIR
#       LIBRARY      the built or installed libgrandcentral.so
#       INCLUDE_DIR  GrandCentral's public headers (the directory that contains dispatch/)
#   LIBDISPATCH_HEADERS=/path/to/dispatch overrides the reference headers
#   (default: the Swift toolchain's, /opt/swift/usr/lib/swift/dispatch);
#   LIBDISPATCH_LIBRARY=/path/to/libdispatch.so the reference library (default: the
#   toolchain's; it is only read with nm, never loaded).
set -euo pipefail

if [ $# -ne 2 ] || [ ! -f "$1" ] || [ ! -f "$2/dispatch/dispatch.h" ]; then
    echo "usage: $0 LIBRARY INCLUDE_DIR" >&2
    exit 64
fi
library=$1
include_dir=$2
reference=${LIBDISPATCH_HEADERS:-/opt/swift/usr/lib/swift/dispatch}
if [ ! -f "$reference/dispatch.h" ]; then
    echo "exports: FAILED: libdispatch's headers are not in $reference (set LIBDISPATCH_HEADERS)" >&2
    exit 1
fi

reference_library=${LIBDISPATCH_LIBRARY:-/opt/swift/usr/lib/swift/linux/libdispatch.so}
reference_names=
if [ -f "$reference_library" ]; then
    reference_names=$(nm -D --defined-only "$reference_library" | awk '{ print $3 }' | sort -u)
fi

symbols=$(nm -D --defined-only "$library") || { echo "exports: FAILED: nm -D cannot read $library" >&2; exit 1; }

# Names GrandCentral's headers declare as functions, and _dispatch_* names libdispatch's
# headers refer to.
declared=$(cat "$include_dir"/dispatch/*.h | grep -oE '\b(lib|_)?dispatch_[A-Za-z0-9_]+[[:space:]]*\(' \
    | sed -E 's/[[:space:]]*\($//' | sort -u)
referenced=$( {
    cat "$reference"/*.h | grep -oE '\b_dispatch_[A-Za-z0-9_]+' || true
    cat "$reference"/*.h | grep -oE 'DISPATCH_SOURCE_TYPE_DECL\([A-Za-z0-9_]+\)' \
        | sed -E 's/DISPATCH_SOURCE_TYPE_DECL\(([A-Za-z0-9_]+)\)/_dispatch_source_type_\1/' || true
} | sort -u)

bad=()
functions=0
data=0
while read -r _ type name; do
    [ -n "${name:-}" ] || continue
    case "$type" in
    T)
        # The run loop's private calls (_dispatch_*_4CF, libdispatch_init) are declared in
        # <dispatch/runloop_private.h>.
        if [[ "$name" =~ ^(lib|_)?dispatch_[A-Za-z0-9_]+$ ]] && grep -qxF "$name" <<<"$declared"; then
            functions=$((functions + 1))
        else
            bad+=("$type $name (a function that is not a dispatch_* function of the public headers)")
            continue
        fi
        ;;
    B | D | R)
        if [[ "$name" =~ ^_dispatch_[A-Za-z0-9_]+$ ]] && grep -qxF "$name" <<<"$referenced"; then
            data=$((data + 1))
        else
            bad+=("$type $name (a data symbol libdispatch's headers do not refer to)")
            continue
        fi
        ;;
    *)
        bad+=("$type $name (kind '$type' is never exported: only functions T and data B/D/R)")
        continue
        ;;
    esac
    # Declared by libdispatch's headers but left out of its Linux build: process and vnode
    # sources exist here (issue 8), under the names the header gives them.
    case "$name" in
    _dispatch_source_type_proc | _dispatch_source_type_vnode) continue ;;
    # Built for Darwin only in libdispatch; here it returns the queue's eventfd.
    _dispatch_runloop_root_queue_get_port_4CF) continue ;;
    esac
    if [ -n "$reference_names" ] && ! grep -qxF "$name" <<<"$reference_names"; then
        bad+=("$type $name (libdispatch.so does not export this name)")
    fi
done <<<"$symbols"

if [ "${#bad[@]}" -gt 0 ]; then
    echo "exports: FAILED: $library exports names that are not libdispatch's (nm -D --defined-only):" >&2
    printf '    %s\n' "${bad[@]}" >&2
    exit 1
fi
compared=${reference_names:+, each also exported by $reference_library}
echo "exports: $library exports $functions dispatch_* functions and $data _dispatch_* data symbols${compared}; nothing else"
