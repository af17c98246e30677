#!/usr/bin/env bash
# Builds examples/ against an installed GrandCentral the way a user would and runs them.
#
#   scripts/examples.sh run   PREFIX   build every example, say what it shows, run it
#                                      (`make demo`)
#   scripts/examples.sh check PREFIX   (`make test`) build and run the Swift consumer's
#       programs, then check the installed library's linkage: readelf -d of
#       libgrandcentral.so names no libdispatch, libswift_Concurrency or libFoundation.
#       The C examples are checked once, by scripts/check-package.sh, against the .deb's
#       files (the same bytes as this install: it compares them); the exports, by the
#       `exports` CTest test.
#
# The C examples are built by scripts/examples-lib.sh with `pkg-config --cflags --libs
# grandcentral` from PREFIX/lib/pkgconfig: pipeline_f.c with gcc (the _f API),
# pipeline_blocks.c with the Swift toolchain's clang -fblocks; examples/cmake-consumer is
# configured with CMAKE_PREFIX_PATH=PREFIX and finds the library with
# find_package(GrandCentral). The Swift consumer shares its SwiftPM scratch with
# scripts/allocation-check.sh (build/swift-release): one release build of GrandCentral.
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
# shellcheck source=examples-lib.sh
. "$root/scripts/examples-lib.sh"

die() {
    echo "examples: FAILED: $*" >&2
    exit 1
}

if [ "$mode" = run ]; then
    gc_build_c_examples "$out" "$prefix"
fi

# A Swift package that depends on GrandCentral by path and uses it like Swift's Dispatch
# (SwiftPM builds the module into each program; there is no C ABI and no .so involved):
# everyday code beside Foundation in Swift 6 and Swift 5 language modes, an async main, a
# RunLoop main and a dispatchMain() tool (examples/swift-consumer/Package.swift).
mkdir -p "$out"
scratch=$root/build/swift-release
"$root/scripts/fresh-scratch.sh" "$scratch"
swift build --package-path "$root/examples/swift-consumer" --scratch-path "$scratch" \
    -c release >"$out/swift-consumer.log" 2>&1 \
    || { cat "$out/swift-consumer.log" >&2; die "examples/swift-consumer did not build"; }
swift_bin=$(swift build --package-path "$root/examples/swift-consumer" --scratch-path "$scratch" \
    -c release --show-bin-path)
swift_programs=(
    "swift-consumer|$swift_bin/SwiftConsumer|everyday Dispatch code with Foundation imported beside GrandCentral (the alias file), Swift 6 language mode"
    "swift-consumer-5|$swift_bin/SwiftConsumer5|the same source in Swift 5 language mode"
    "async-main|$swift_bin/AsyncMain|an async main: GrandCentral's main queue runs on the main actor's thread, in order, beside @MainActor tasks"
    "runloop-main|$swift_bin/RunLoopMain|a Foundation RunLoop.main.run() program: GrandCentral's main queue drains on the main thread"
    "dispatch-main|$swift_bin/DispatchMainTool|a command-line tool that ends in dispatchMain()"
)

# --- run -----------------------------------------------------------------------------
programs=()
if [ "$mode" = run ]; then programs=(
    "pipeline_f|$out/pipeline_f|plain C with gcc and the _f API: a serial isolation queue guarding shared state, a group fanning work out over the global queue, dispatch_apply_f, dispatch_after_f, and dispatch_main()"
    "pipeline_blocks|$out/pipeline_blocks|the same pipeline written with blocks (clang -fblocks), the way GCD code usually reads"
    "cmake-consumer|$out/cmake-consumer/cmake_consumer|a CMake project that links GrandCentral::grandcentral via find_package(GrandCentral)"
); fi
for entry in ${programs[@]+"${programs[@]}"} "${swift_programs[@]}"; do
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
echo "examples: swift-consumer's programs (Swift 6 and 5 beside Foundation, async main, RunLoop main, dispatchMain) built and ran;"
echo "examples: libgrandcentral.so needs no libdispatch/libswift_Concurrency/libFoundation"
