#!/usr/bin/env bash
# Builds bench/swift's AllocationCheck in release mode (the way Swift programs ship) and
# runs it: it counts the heap allocations of the Swift API's hot calls (sync, group
# enter/leave, semaphore signal/wait, work item perform, concurrentPerform, an actor hop
# between GrandCentral queues) and fails if any is over its budget per call: none for
# most; 0.01 for concurrentPerform and the actor hop (their continuations circulate
# through the depot in batches, so a batch may be made now and then); 1.01 for an async
# plus the sync that waits behind it (the async's closure context). The XCTest suite's
# AllocationTests check the same calls in the debug build. The scratch (build/swift-release)
# is shared with scripts/examples.sh's Swift consumer, so `make test` compiles GrandCentral
# in release mode for SwiftPM once.
#
#   scripts/allocation-check.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
package=$root/bench/swift
scratch=$root/build/swift-release
mkdir -p "$root/build"
"$root/scripts/fresh-scratch.sh" "$scratch"
swift build --package-path "$package" --scratch-path "$scratch" -c release --product AllocationCheck \
    >"$root/build/allocation-check.log" 2>&1 \
    || { cat "$root/build/allocation-check.log" >&2; echo "allocation-check: AllocationCheck did not build" >&2; exit 1; }
bin=$(swift build --package-path "$package" --scratch-path "$scratch" -c release --show-bin-path)
"$bin/AllocationCheck"
