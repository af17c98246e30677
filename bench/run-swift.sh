#!/usr/bin/env bash
# The Swift rows of the benchmark: bench/swift/ builds one source twice in release mode
# (BenchDispatch imports Swift's Dispatch, BenchGrandCentral imports GrandCentral); each runs
# in its own process and prints nanoseconds per call for each case; this prints them side by
# side with GrandCentral's time as a ratio of Dispatch's (below 1.0 is faster).
#
#   bench/run-swift.sh [--quick]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
package=$root/bench/swift
scratch=$root/build/bench-swift
"$root/scripts/fresh-scratch.sh" "$scratch"
swift build --package-path "$package" --scratch-path "$scratch" -c release >"$root/build/bench-swift.log" 2>&1 \
    || { cat "$root/build/bench-swift.log" >&2; echo "bench: bench/swift did not build" >&2; exit 1; }
bin=$(swift build --package-path "$package" --scratch-path "$scratch" -c release --show-bin-path)

dispatch=$("$bin/BenchDispatch" "$@")
grandcentral=$("$bin/BenchGrandCentral" "$@")

printf '\n%-36s %14s %14s %8s\n' "Swift API, ns per call" "Dispatch" "GrandCentral" "ratio"
join -t $'\t' <(sort -t $'\t' -k1,1 <<<"$dispatch") <(sort -t $'\t' -k1,1 <<<"$grandcentral") \
    | awk -F '\t' '{ printf "%-36s %14.1f %14.1f %7.2fx\n", $1, $2, $3, ($2 > 0 ? $3 / $2 : 0) }'
