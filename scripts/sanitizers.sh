#!/usr/bin/env bash
# The concurrency checks run before a concurrency change is called done (not part of
# `make test`: together they take several minutes):
#   1. swift test --sanitize=thread   (XCTest: engine and Swift API under TSan)
#   2. swift test --sanitize=address  (same under ASan; LeakSanitizer reports only
#      XCTest's own one-object leak in awaitUsingExpectation, so leaks are not fatal here)
#   3. the C tests' clang variants against a libgrandcentral.so built with ASan, leak
#      detection on. (The gcc variants cannot load clang's ASan runtime.) The Swift
#      runtime's crash backtracer is switched off so the misuse tests see a plain SIGABRT.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

echo "==> swift test --sanitize=thread"
swift test --disable-swift-testing --sanitize=thread --scratch-path .build-tsan

echo "==> swift test --sanitize=address"
ASAN_OPTIONS=detect_leaks=0 swift test --disable-swift-testing --sanitize=address --scratch-path .build-asan

echo "==> C tests (clang variants) against an ASan build of the library"
build=build-asan
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_Swift_FLAGS="-sanitize=address" \
    -DCMAKE_C_FLAGS="-fsanitize=address -fno-omit-frame-pointer" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address" >/dev/null
targets=$(ninja -C "$build" -t targets all | grep -oE '^ctests/[a-z_]+\.clang:' | tr -d ':' | sort -u)
ninja -C "$build" grandcentral $targets
# The fault-injection tests do not run here: faults_threads and faults_memory need the
# LD_PRELOAD shims this build does not make (and a malloc shim cannot sit under ASan's own
# malloc), and faults_descriptors' children fill the descriptor table, where LeakSanitizer
# cannot start. ctest runs them against the ordinary build.
SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=1 ctest --test-dir "$build" -L clang --output-on-failure \
    -E '^faults_(threads|memory|descriptors)\.clang$'
