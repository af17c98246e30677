# Sourced by scripts/examples.sh and scripts/check-package.sh: builds the C examples the
# way a user would and checks what a built program loads. The caller defines die() and
# sets PKG_CONFIG_PATH to the grandcentral.pc it wants.
#
#   gc_build_c_examples OUT CMAKE_PREFIX
#       OUT/pipeline_f       examples/pipeline_f.c with gcc (the _f API)
#       OUT/pipeline_blocks  examples/pipeline_blocks.c with clang -fblocks
#       OUT/cmake-consumer/cmake_consumer
#                            examples/cmake-consumer, find_package(GrandCentral) with
#                            CMAKE_PREFIX_PATH=CMAKE_PREFIX; fails unless it found the
#                            package under CMAKE_PREFIX
#       both C files with -Wall -Wextra -Werror and `pkg-config --cflags --libs grandcentral`
#   gc_c_examples OUT    the three programs' paths, one a line
#   gc_check_links PROGRAM LIBRARY
#       ldd of PROGRAM resolves libgrandcentral.so.0 to LIBRARY (compared after
#       readlink -f), loads no libdispatch, libswift_Concurrency or libFoundation, and
#       exactly one libBlocksRuntime
# shellcheck shell=bash

gc_examples_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

gc_build_c_examples() {
    local out=$1 cmake_prefix=$2 gc_flags config_dir
    local gcc=${GCC:-gcc}
    local clang=${CLANG:-$(command -v clang || echo /opt/swift/usr/bin/clang)}
    pkg-config --exists grandcentral || die "pkg-config cannot find grandcentral (PKG_CONFIG_PATH=${PKG_CONFIG_PATH:-})"
    read -r -a gc_flags <<<"$(pkg-config --cflags --libs grandcentral)"
    mkdir -p "$out"
    "$gcc" -std=c11 -O2 -Wall -Wextra -Werror "$gc_examples_root/examples/pipeline_f.c" -o "$out/pipeline_f" \
        "${gc_flags[@]}" || die "pipeline_f.c did not build with gcc (flags: ${gc_flags[*]})"
    "$clang" -fblocks -std=c11 -O2 -Wall -Wextra -Werror "$gc_examples_root/examples/pipeline_blocks.c" \
        -o "$out/pipeline_blocks" "${gc_flags[@]}" \
        || die "pipeline_blocks.c did not build with clang -fblocks (flags: ${gc_flags[*]})"
    cmake -S "$gc_examples_root/examples/cmake-consumer" -B "$out/cmake-consumer" -G Ninja \
        -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$cmake_prefix" >"$out/cmake-consumer.log" 2>&1 \
        || { cat "$out/cmake-consumer.log" >&2; die "examples/cmake-consumer did not configure (find_package(GrandCentral) in $cmake_prefix)"; }
    config_dir=$(sed -n 's/^GrandCentral_DIR:PATH=//p' "$out/cmake-consumer/CMakeCache.txt")
    [[ "$config_dir" == "$cmake_prefix/"* ]] || die "find_package(GrandCentral) took $config_dir, not $cmake_prefix's"
    cmake --build "$out/cmake-consumer" >>"$out/cmake-consumer.log" 2>&1 \
        || { cat "$out/cmake-consumer.log" >&2; die "examples/cmake-consumer did not build"; }
}

gc_c_examples() {
    printf '%s\n' "$1/pipeline_f" "$1/pipeline_blocks" "$1/cmake-consumer/cmake_consumer"
}

gc_check_links() {
    local program=$1 want name deps got blocks
    want=$(readlink -f "$2")
    name=$(basename "$program")
    deps=$(ldd "$program" 2>&1) || die "ldd $program failed: $deps"
    got=$(awk '$1 == "libgrandcentral.so.0" { print $3 }' <<<"$deps")
    [ -n "$got" ] && [ "$(readlink -f "$got")" = "$want" ] \
        || die "$name resolves libgrandcentral.so.0 to '${got:-nothing}', not $want:"$'\n'"$deps"
    if grep -q -E 'libdispatch\.so|libswift_Concurrency|libFoundation' <<<"$deps"; then
        die "$name loads libdispatch, Swift Concurrency or Foundation:"$'\n'"$deps"
    fi
    blocks=$(grep -c 'libBlocksRuntime' <<<"$deps" || true)
    [ "$blocks" = 1 ] || die "$name loads $blocks copies of libBlocksRuntime (want exactly one):"$'\n'"$deps"
}
