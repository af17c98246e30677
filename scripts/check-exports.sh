#!/usr/bin/env bash
# Checks that libgrandcentral.so exports libdispatch's names, all of them, and nothing else
# (DESIGN.md, hard rule 4, and "the whole export list" of the drop-in section):
#
#   1. the names `nm -D --defined-only` lists equal the toolchain libdispatch.so's, minus
#      the linker's own (_edata, _end, __bss_start), minus the EXCEPTIONS below (names
#      GrandCentral may leave out, each with its reason), plus the ADDITIONS below (names
#      GrandCentral exports that libdispatch's Linux build does not);
#   2. each name is the same kind of symbol as libdispatch's: a function where libdispatch
#      has a function, a data object where it has a data object;
#   3. each data object is no larger than libdispatch's (`nm -S`): gcc's PIE executables
#      take a copy of external data they reference (a copy relocation) of the size the
#      executable was linked against, so a larger object would be cut short;
#   4. every exported dispatch_* function is declared in GrandCentral's headers.
#
# Anything else fails: an internal name (gc_*, a Swift symbol, a TLS variable), a local
# symbol left in the dynamic symbol table, a name libdispatch has that GrandCentral lacks.
# The linker's version script (cmake/exports.map) is what keeps the list to these names;
# this script is what notices when it does not.
#
#   scripts/check-exports.sh LIBRARY INCLUDE_DIR
#       LIBRARY      the built or installed libgrandcentral.so
#       INCLUDE_DIR  GrandCentral's public headers (the directory that contains dispatch/)
#   LIBDISPATCH_LIBRARY=/path/to/libdispatch.so the reference library (default: the
#   toolchain's; it is only read with nm, never loaded).
set -euo pipefail

if [ $# -ne 2 ] || [ ! -f "$1" ] || [ ! -f "$2/dispatch/dispatch.h" ]; then
    echo "usage: $0 LIBRARY INCLUDE_DIR" >&2
    exit 64
fi
library=$1
include_dir=$2
reference_library=${LIBDISPATCH_LIBRARY:-/opt/swift/usr/lib/swift/linux/libdispatch.so}
if [ ! -f "$reference_library" ]; then
    echo "exports: FAILED: no reference libdispatch.so at $reference_library (set LIBDISPATCH_LIBRARY)" >&2
    exit 1
fi

# The linker's own symbols, in every shared object; not part of anyone's API.
linker_names="_edata _end __bss_start"

# EXCEPTIONS: libdispatch names GrandCentral may leave out (present or not, both pass).
#   __dispatch_tsd: libdispatch's thread-local block of per-thread state (its current queue,
#   frame, voucher ... in libdispatch's own layout), exported only because libdispatch's
#   inline functions in its private headers read it. Nothing outside libdispatch's source
#   tree can use it, GrandCentral keeps its per-thread state in its own layout
#   (CGrandCentral's gc_thread_storage), and a TLS symbol of a foreign layout would only
#   invite reads of garbage.
exceptions=(
    __dispatch_tsd
)

# ADDITIONS: GrandCentral's names that libdispatch's Linux build does not export. Process
# and vnode sources exist here (issue 8), under the names libdispatch's header gives them.
additions=(
    _dispatch_source_type_proc
    _dispatch_source_type_vnode
    # Built for Darwin only in libdispatch; here it returns the run-loop queue's eventfd
    # (<dispatch/runloop_private.h>).
    _dispatch_runloop_root_queue_get_port_4CF
)

# "name kind size type" per defined dynamic symbol; kind is F (function) or D (data
# object), size is hexadecimal, type is nm's letter.
symbol_table() {
    nm -D -S --defined-only "$1" | awk '
        NF == 4 { name = $4; type = $3; size = $2 }
        NF == 3 { name = $3; type = $2; size = "0" }
        NF < 3 { next }
        { kind = (type == "T" || type == "t" || type == "W" || type == "i") ? "F" : "D"
          print name, kind, size, type }' | sort -u
}

ours=$(symbol_table "$library") || { echo "exports: FAILED: nm -D cannot read $library" >&2; exit 1; }
theirs=$(symbol_table "$reference_library")

declared=$(cat "$include_dir"/dispatch/*.h | grep -oE '\bdispatch_[A-Za-z0-9_]+[[:space:]]*\(' \
    | sed -E 's/[[:space:]]*\($//' | sort -u)

is_in() { local x=$1; shift; local y; for y in "$@"; do [ "$x" = "$y" ] && return 0; done; return 1; }

bad=()
declare -A their_kind their_size our_names
while read -r name kind size _; do
    [ -n "$name" ] || continue
    is_in "$name" $linker_names && continue
    their_kind[$name]=$kind
    their_size[$name]=$((16#$size))
done <<<"$theirs"

functions=0
data=0
while read -r name kind size type; do
    [ -n "$name" ] || continue
    is_in "$name" $linker_names && continue
    our_names[$name]=1
    if [ -z "${their_kind[$name]:-}" ]; then
        is_in "$name" "${additions[@]}" || bad+=("$type $name (libdispatch.so does not export this name)")
        [ "$kind" = F ] && functions=$((functions + 1)) || data=$((data + 1))
        continue
    fi
    if [ "$kind" != "${their_kind[$name]}" ]; then
        bad+=("$type $name (libdispatch's is a $( [ "${their_kind[$name]}" = F ] && echo function || echo data object ))")
        continue
    fi
    if [ "$kind" = F ]; then
        functions=$((functions + 1))
        if [[ "$name" =~ ^dispatch_ ]] && ! grep -qxF "$name" <<<"$declared"; then
            bad+=("$type $name (a dispatch_* function GrandCentral's headers do not declare)")
        fi
    else
        data=$((data + 1))
        if [ $((16#$size)) -gt "${their_size[$name]}" ]; then
            bad+=("$type $name ($((16#$size)) bytes, libdispatch's is ${their_size[$name]}: a copy relocation would cut it short)")
        fi
    fi
done <<<"$ours"

missing=0
for name in "${!their_kind[@]}"; do
    [ -n "${our_names[$name]:-}" ] && continue
    is_in "$name" "${exceptions[@]}" && continue
    bad+=("$name (libdispatch.so exports it; GrandCentral does not, and it is not a listed exception)")
    missing=$((missing + 1))
done

if [ "${#bad[@]}" -gt 0 ]; then
    echo "exports: FAILED: $library's exports differ from $reference_library's (nm -D --defined-only):" >&2
    printf '    %s\n' "${bad[@]}" | sort >&2
    exit 1
fi
excepted=0
for name in "${exceptions[@]}"; do [ -z "${our_names[$name]:-}" ] && excepted=$((excepted + 1)); done
echo "exports: $library exports $functions functions and $data data objects: libdispatch's" \
    "list minus $excepted listed exceptions, plus ${#additions[@]} additions; no data object larger than libdispatch's"
