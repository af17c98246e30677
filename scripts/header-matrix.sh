#!/usr/bin/env bash
# Compiles ctests/header_matrix.c against the public headers in INCLUDE_DIR with every
# compiler and language mode GrandCentral supports (DESIGN.md, hard rule 5): gcc and
# clang as C99 and C11 (clang with and without -fblocks), g++ and clang++ as C++11 and
# C++17, each first with -Wall -Wextra -Werror and then additionally with -pedantic and
# a few stricter warnings. Compile only (-c); nothing is linked or run.
#
# Prints one line per combination and a final "N passed, M failed"; exits non-zero if
# any combination failed (its compiler output is shown) or a compiler is missing.
#
#   scripts/header-matrix.sh include
#   CC_GCC=gcc-13 CC_CLANG=/opt/swift/usr/bin/clang scripts/header-matrix.sh /usr/local/include
set -u

if [ $# -ne 1 ] || [ ! -f "$1/dispatch/dispatch.h" ]; then
    echo "usage: $0 INCLUDE_DIR   (the directory that contains dispatch/dispatch.h)" >&2
    exit 2
fi
include_dir=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
source_file="$here/../ctests/header_matrix.c"

# Compilers: overridable; clang defaults to the one on PATH, else the Swift toolchain's.
find_tool() {
    local name=$1
    if command -v "$name" >/dev/null 2>&1; then command -v "$name"
    elif [ -x "/opt/swift/usr/bin/$name" ]; then echo "/opt/swift/usr/bin/$name"
    else echo "$name"; fi
}
gcc_c=${CC_GCC:-$(find_tool gcc)}
gcc_cxx=${CXX_GCC:-$(find_tool g++)}
clang_c=${CC_CLANG:-$(find_tool clang)}
clang_cxx=${CXX_CLANG:-$(find_tool clang++)}

base_flags="-Wall -Wextra -Werror"
strict_c="-pedantic -Wundef -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wcast-qual"
strict_cxx="-pedantic -Wundef -Wshadow -Wcast-qual -Wold-style-cast"

# name | compiler | flags (language, mode)
combinations=(
    "gcc -std=c99|$gcc_c|-x c -std=c99"
    "gcc -std=c11|$gcc_c|-x c -std=c11"
    "clang -std=c99|$clang_c|-x c -std=c99"
    "clang -std=c11|$clang_c|-x c -std=c11"
    "clang -std=c99 -fblocks|$clang_c|-x c -std=c99 -fblocks"
    "clang -std=c11 -fblocks|$clang_c|-x c -std=c11 -fblocks"
    "g++ -std=c++11|$gcc_cxx|-x c++ -std=c++11"
    "g++ -std=c++17|$gcc_cxx|-x c++ -std=c++17"
    "clang++ -std=c++11|$clang_cxx|-x c++ -std=c++11"
    "clang++ -std=c++17|$clang_cxx|-x c++ -std=c++17"
    "clang++ -std=c++17 -fblocks|$clang_cxx|-x c++ -std=c++17 -fblocks"
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
for combination in "${combinations[@]}"; do
    IFS='|' read -r name compiler mode <<<"$combination"
    case "$mode" in *c++*) strict=$strict_cxx ;; *) strict=$strict_c ;; esac
    for level in plain strict; do
        flags="$mode $base_flags"
        label="$name $base_flags"
        if [ "$level" = strict ]; then
            flags="$flags $strict"
            label="$label $strict"
        fi
        # shellcheck disable=SC2086  # flags are word lists on purpose
        if "$compiler" $flags -I"$include_dir" -c "$source_file" -o "$work/out.o" \
                >"$work/log" 2>&1; then
            printf 'PASS  %s\n' "$label"
            passed=$((passed + 1))
        else
            printf 'FAIL  %s\n' "$label"
            sed 's/^/      /' "$work/log" | head -40
            failed=$((failed + 1))
        fi
    done
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
