#!/usr/bin/env bash
# The drop-in rows of the benchmark: one ordinary Swift program (bench/dropin/), built the
# usual way against the toolchain's Dispatch and Swift concurrency, run unchanged on the
# toolchain's libdispatch and on GrandCentral's drop-in libdispatch.so through
# PREFIX/bin/grandcentral-run. Each side runs in fresh processes, alternating which goes
# first; each row shows each side's best run (lowest time) and GrandCentral's as a ratio of
# libdispatch's (below 1.0 is faster). The table also goes to bench/out/dropin.txt.
#
#   bench/run-dropin.sh [--quick] [--reps N] [--only CASE[,CASE…]]
#
#   --quick    one run per library, each case at a tenth of its size
#   --reps N   N runs per library (default 5)
#   --only     run only the named cases: taskgroup, actor, sleep, asynclet, continuation,
#              asyncsync, sync, perform, group
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix=${PREFIX:-$root/prefix}
out=$root/bench/out
reps=5
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) reps=1; args+=(--quick) ;;
        --reps) reps=$2; shift ;;
        --only) args+=(--only "$2"); shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "bench/run-dropin.sh: unknown option $1 (try --help)" >&2; exit 64 ;;
    esac
    shift
done

launcher=$prefix/bin/grandcentral-run
[ -x "$launcher" ] || { echo "bench: no $launcher; run 'make install'" >&2; exit 1; }

scratch=$root/build/bench-dropin
mkdir -p "$out" "$root/build"
swift build --package-path "$root/bench/dropin" --scratch-path "$scratch" -c release \
    >"$root/build/bench-dropin.log" 2>&1 \
    || { cat "$root/build/bench-dropin.log" >&2; echo "bench: bench/dropin did not build" >&2; exit 1; }
bin=$(swift build --package-path "$root/bench/dropin" --scratch-path "$scratch" -c release --show-bin-path)/DropinBench

# Which file each side mapped, from the process's own /proc/self/maps: the comparison means
# nothing unless the second side really ran on GrandCentral.
lib_file=$("$bin" --which)
gc_file=$("$launcher" "$bin" --which)
case "$gc_file" in
    "$lib_file"|"?") echo "bench: grandcentral-run mapped '$gc_file', not GrandCentral" >&2; exit 1 ;;
esac

runs=$(mktemp -d /tmp/gc-bench-dropin.XXXXXX)
trap 'rm -rf "$runs"' EXIT
for ((i = 0; i < reps; i++)); do
    if ((i % 2 == 0)); then
        "$bin" "${args[@]}" >"$runs/lib.$i"
        "$launcher" "$bin" "${args[@]}" >"$runs/gc.$i"
    else
        "$launcher" "$bin" "${args[@]}" >"$runs/gc.$i"
        "$bin" "${args[@]}" >"$runs/lib.$i"
    fi
done

# The best (lowest) value per case on each side, in the program's order.
best() { cat "$runs"/"$1".* | awk -F '\t' '!($1 in v) || $2 < v[$1] { v[$1] = $2 }
    !($1 in seen) { seen[$1] = 1; order[++n] = $1 } END { for (i = 1; i <= n; i++) print order[i] "\t" v[order[i]] }'; }

{
    printf '\nDrop-in: the same Swift binary on each libdispatch.so (ns, best of %d fresh processes)\n' "$reps"
    printf '  libdispatch:  %s\n  GrandCentral: %s\n' "$lib_file" "$gc_file"
    printf '%-40s %14s %14s %8s\n' "case" "libdispatch" "GrandCentral" "ratio"
    join -t $'\t' -j 1 <(best lib | nl -w1 -s$'\t' | awk -F '\t' '{ print $2 "\t" $1 "\t" $3 }' | sort -t $'\t' -k1,1) \
                       <(best gc | sort -t $'\t' -k1,1) \
        | sort -t $'\t' -k2,2n \
        | awk -F '\t' '{ printf "%-40s %14.1f %14.1f %7.2fx\n", $1, $3, $4, ($3 > 0 ? $4 / $3 : 0) }'
} | tee "$out/dropin.txt"
