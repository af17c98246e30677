#!/usr/bin/env bash
# Builds examples/ against an installed GrandCentral the way a user would, runs them, and
# (for `make test`) checks what the built programs load.
#
#   scripts/examples.sh run   PREFIX   build every example, say what it shows, run it
#   scripts/examples.sh check PREFIX   build and run every example, then check linkage:
#       - ldd of each program: no libdispatch.so, exactly one libBlocksRuntime
#       - readelf -d of libgrandcentral.so: no libdispatch, libswift_Concurrency, libFoundation
#       - nm -D of the installed libgrandcentral.so: libdispatch's names and nothing else
#         (scripts/check-exports.sh)
#
# The C examples are compiled with `pkg-config --cflags --libs grandcentral` from
# PREFIX/lib/pkgconfig: pipeline_f.c with gcc (the _f API), pipeline_blocks.c with the Swift
# toolchain's clang -fblocks. examples/cmake-consumer is configured with
# CMAKE_PREFIX_PATH=PREFIX and finds the library with find_package(GrandCentral).
# Programs go to build/examples/. Any failure exits non-zero with a line saying what failed.
set -euo pipefail

mode=${1:-}
prefix=${2:-}
if [ -z "$mode" ] || [ -z "$prefix" ] || { [ "$mode" != run ] && [ "$mode" != check ]; }; then
    echo "usage: $0 run|check PREFIX" >&2
    exit 64
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$root/build/examples
prefix=$(cd "$prefix" 2>/dev/null && pwd) || { echo "examples: no install prefix $2; run 'make install'" >&2; exit 1; }
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
gcc=${GCC:-gcc}
clang=${CLANG:-$(command -v clang || echo /opt/swift/usr/bin/clang)}

die() {
    echo "examples: FAILED: $*" >&2
    exit 1
}

pkg-config --exists grandcentral || die "pkg-config cannot find grandcentral in $prefix/lib/pkgconfig"
read -r -a gc_flags <<<"$(pkg-config --cflags --libs grandcentral)"
mkdir -p "$out"

# --- build ---------------------------------------------------------------------------
"$gcc" -std=c11 -O2 -Wall -Wextra -Werror "$root/examples/pipeline_f.c" -o "$out/pipeline_f" \
    "${gc_flags[@]}" || die "pipeline_f.c did not build with gcc"
"$clang" -fblocks -std=c11 -O2 -Wall -Wextra -Werror "$root/examples/pipeline_blocks.c" \
    -o "$out/pipeline_blocks" "${gc_flags[@]}" || die "pipeline_blocks.c did not build with clang -fblocks"
cmake -S "$root/examples/cmake-consumer" -B "$out/cmake-consumer" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >"$out/cmake-consumer.log" 2>&1 \
    || { cat "$out/cmake-consumer.log" >&2; die "examples/cmake-consumer did not configure (find_package(GrandCentral))"; }
cmake --build "$out/cmake-consumer" >>"$out/cmake-consumer.log" 2>&1 \
    || { cat "$out/cmake-consumer.log" >&2; die "examples/cmake-consumer did not build"; }

# A Swift package that depends on GrandCentral by path and uses it like Swift's Dispatch
# (SwiftPM builds the module into each program; there is no C ABI and no .so involved):
# everyday code beside Foundation in Swift 6 and Swift 5 language modes, an async main, a
# RunLoop main and a dispatchMain() tool (examples/swift-consumer/Package.swift).
"$root/scripts/fresh-scratch.sh" "$out/swift-consumer"
swift build --package-path "$root/examples/swift-consumer" --scratch-path "$out/swift-consumer" \
    -c release >"$out/swift-consumer.log" 2>&1 \
    || { cat "$out/swift-consumer.log" >&2; die "examples/swift-consumer did not build"; }
swift_bin=$(swift build --package-path "$root/examples/swift-consumer" --scratch-path "$out/swift-consumer" \
    -c release --show-bin-path)
swift_programs=(
    "swift-consumer|$swift_bin/SwiftConsumer|everyday Dispatch code with Foundation imported beside GrandCentral (the alias file), Swift 6 language mode"
    "swift-consumer-5|$swift_bin/SwiftConsumer5|the same source in Swift 5 language mode"
    "async-main|$swift_bin/AsyncMain|an async main: GrandCentral's main queue runs on the main actor's thread, in order, beside @MainActor tasks"
    "runloop-main|$swift_bin/RunLoopMain|a Foundation RunLoop.main.run() program: GrandCentral's main queue drains on the main thread"
    "dispatch-main|$swift_bin/DispatchMainTool|a command-line tool that ends in dispatchMain()"
)

# --- run -----------------------------------------------------------------------------
programs=(
    "pipeline_f|$out/pipeline_f|plain C with gcc and the _f API: a serial isolation queue guarding shared state, a group fanning work out over the global queue, dispatch_apply_f, dispatch_after_f, and dispatch_main()"
    "pipeline_blocks|$out/pipeline_blocks|the same pipeline written with blocks (clang -fblocks), the way GCD code usually reads"
    "cmake-consumer|$out/cmake-consumer/cmake_consumer|a CMake project that links GrandCentral::grandcentral via find_package(GrandCentral)"
)
for entry in "${programs[@]}" "${swift_programs[@]}"; do
    IFS='|' read -r name path what <<<"$entry"
    if [ "$mode" = run ]; then
        echo
        echo "== $name: $what"
    fi
    timeout 60 "$path" || die "$name exited with status $?"
done

[ "$mode" = run ] && exit 0

# --- check linkage -------------------------------------------------------------------
library=$prefix/lib/libgrandcentral.so
[ -e "$library" ] || die "$library is not installed"
dynamic=$(readelf -d "$library" 2>&1) || die "readelf -d cannot read $library: $dynamic"
needed=$(awk '/\(NEEDED\)/ { print $NF }' <<<"$dynamic")
for forbidden in libdispatch libswift_Concurrency libFoundation; do
    if grep -q "$forbidden" <<<"$needed"; then
        die "libgrandcentral.so depends on $forbidden (readelf -d: $(tr '\n' ' ' <<<"$needed"))"
    fi
done
"$root/scripts/check-exports.sh" "$library" "$prefix/include" >/dev/null \
    || die "libgrandcentral.so exports names that are not libdispatch's (scripts/check-exports.sh)"
for entry in "${programs[@]}"; do
    IFS='|' read -r name path _ <<<"$entry"
    deps=$(ldd "$path" 2>&1) || die "ldd $path failed: $deps"
    grep -q 'libgrandcentral\.so' <<<"$deps" || die "$name does not load libgrandcentral.so"
    if grep -q -E 'libdispatch\.so|libswift_Concurrency|libFoundation' <<<"$deps"; then
        die "$name loads libdispatch, Swift Concurrency or Foundation:"$'\n'"$deps"
    fi
    blocks=$(grep -c 'libBlocksRuntime' <<<"$deps" || true)
    [ "$blocks" = 1 ] || die "$name loads $blocks copies of libBlocksRuntime (want exactly one):"$'\n'"$deps"
done
echo "examples: pipeline_f (gcc), pipeline_blocks (clang -fblocks), cmake-consumer built against $prefix and ran;"
echo "examples: swift-consumer's programs (Swift 6 and 5 beside Foundation, async main, RunLoop main, dispatchMain) built and ran;"
echo "examples: libgrandcentral.so needs no libdispatch/libswift_Concurrency/libFoundation and exports only libdispatch's names;"
echo "examples: each program loads one libBlocksRuntime"
