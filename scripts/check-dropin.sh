#!/usr/bin/env bash
# The drop-in check (`make test`): programs built the ordinary way against the Swift
# toolchain run twice, once on the toolchain's libdispatch and once through
# PREFIX/bin/grandcentral-run, and must behave the same: the same standard output and the
# same exit status. The loader's own record (LD_DEBUG=libs, written to a file) must show
# the second run initialising PREFIX's lib/grandcentral/libdispatch.so and never the
# toolchain's, and the first run the toolchain's.
#
#   (a) C tests from ctests/, built as ctests/run-reference.sh builds them (the toolchain's
#       clang and headers, -DGC_REFERENCE_LIBDISPATCH, -ldispatch);
#   (b) tests/dropin: Swift programs doing what Swift-on-Linux code does (an async main;
#       dispatchMain; RunLoop.main with Timer and the main queue; OperationQueue; Process;
#       FileHandle.readabilityHandler; signal and timer sources; DispatchIO;
#       NotificationCenter; URLSession on data: URLs), compiled once with swiftc;
#   (c) tests/dropin/fork.c: children of a busy parent use dispatch (through the launcher
#       only: libdispatch's children hang).
#
#   scripts/check-dropin.sh PREFIX
#   SWIFT_ROOT=/opt/swift/usr   the toolchain (default)
# Any difference fails, with both outputs shown.
set -euo pipefail

root_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 PREFIX" >&2; exit 64; }
prefix=$(cd "$1" && pwd -P)
swift_root=${SWIFT_ROOT:-/opt/swift/usr}
toolchain_lib=$(cd "$swift_root/lib/swift/linux" && pwd -P)
run="$prefix/bin/grandcentral-run"
dropin="$prefix/lib/grandcentral/libdispatch.so"

die() { echo "check-dropin: FAILED: $*" >&2; exit 1; }
[ -x "$run" ] || die "$run is missing (make install)"
[ -f "$dropin" ] || die "$dropin is missing (make install)"
[ -f "$toolchain_lib/libdispatch.so" ] || die "the toolchain's libdispatch is not in $toolchain_lib"

out=$(mktemp -d "${TMPDIR:-/tmp}/gc-dropin.XXXXXX")
trap 'rm -rf "$out"' EXIT

# C tests whose output is the same on both libraries. Left out: source_lifecycle (a
# GrandCentral promise libdispatch does not keep: an _f handler's context is read when it
# runs; the test says so under GC_REFERENCE_LIBDISPATCH), debug (dispatch_debug's text is
# each library's own), source_proc/source_vnode (not in libdispatch on Linux), and the
# slow stress tests, timers and source_timer (wall-clock bounds, such as a 2 s
# dispatch_after firing within 100 ms of its deadline, that a machine loaded 7 deep misses
# now and then on either library; ctest runs them on GrandCentral), and io (libdispatch fails its barrier section now and then: a write
# submitted before a barrier had not finished when the barrier ran, 1 run in 3 on a loaded
# machine). misuse is compared by exit status only: libdispatch dies of SIGSEGV
# on some mistakes that GrandCentral reports with a BUG IN CLIENT line and SIGILL.
c_tests=(after_time apply barriers blocks_barrier blocks_workitem data groups main_queue
         objects once private queues semaphores source_data source_descriptor source_signal
         runloop specific sync targets type_generic workitem)
status_only=(misuse)

echo "check-dropin: building ${#c_tests[@]}+${#status_only[@]} C tests and the Swift programs against $swift_root"
for name in "${c_tests[@]}" "${status_only[@]}"; do
    "$swift_root/bin/clang" -fblocks -std=c11 -O2 -DGC_REFERENCE_LIBDISPATCH \
        -I"$swift_root/lib/swift" -I"$root_dir/ctests" "$root_dir/ctests/$name.c" -o "$out/$name" \
        -L"$toolchain_lib" -Wl,-rpath,"$toolchain_lib" -ldispatch -lBlocksRuntime -pthread \
        2>"$out/$name.build" || { cat "$out/$name.build" >&2; die "$name does not build against the toolchain"; }
done
swift_dir="$root_dir/tests/dropin"
"$swift_root/bin/swiftc" -O "$swift_dir"/cases/*.swift "$swift_dir/Common.swift" -o "$out/dropin-cases" \
    >"$out/cases.build" 2>&1 &
cases_pid=$!
"$swift_root/bin/swiftc" -O -parse-as-library "$swift_dir"/async/*.swift "$swift_dir/Common.swift" \
    -o "$out/dropin-async" >"$out/async.build" 2>&1 \
    || { cat "$out/async.build" >&2; die "tests/dropin/async does not build"; }
wait "$cases_pid" || { cat "$out/cases.build" >&2; die "tests/dropin/cases does not build"; }

# run_one LABEL MODE COMMAND...: runs COMMAND on libdispatch, then through grandcentral-run;
# MODE is "output" (stdout and status must match), "sections" (the C tests' unindented
# lines, section titles and PASS/FAIL, and status must match: their indented lines report
# measured times) or "status" (status must match).
failures=0
run_one() {
    local label=$1 mode=$2
    shift 2
    local ref="$out/run.${label//\//-}.ref" gc="$out/run.${label//\//-}.gc"
    local ref_status=0 gc_status=0
    LD_DEBUG=libs LD_DEBUG_OUTPUT="$ref.ld" timeout 300 "$@" >"$ref.out" 2>"$ref.err" || ref_status=$?
    LD_DEBUG=libs LD_DEBUG_OUTPUT="$gc.ld" timeout 300 "$run" "$@" >"$gc.out" 2>"$gc.err" || gc_status=$?
    local problem=
    # The loader's record, from every process of the run (Process starts /bin/sh).
    if ! grep -qs "calling init: $toolchain_lib/libdispatch.so\$" "$ref.ld".*; then
        problem="the libdispatch run did not initialise $toolchain_lib/libdispatch.so"
    elif ! grep -qs "calling init: $prefix/lib/grandcentral/libdispatch.so\$" "$gc.ld".*; then
        problem="the grandcentral-run run did not initialise $dropin"
    elif grep -qs "calling init: $toolchain_lib/libdispatch.so\$" "$gc.ld".*; then
        problem="the grandcentral-run run initialised the toolchain's libdispatch too"
    elif [ "$ref_status" -ne "$gc_status" ]; then
        problem="exit status $ref_status on libdispatch, $gc_status on GrandCentral"
    elif [ "$mode" = output ] && ! cmp -s "$ref.out" "$gc.out"; then
        problem="the output differs"
    elif [ "$mode" = sections ] && ! cmp -s <(grep -v '^[[:space:]]' "$ref.out") <(grep -v '^[[:space:]]' "$gc.out"); then
        problem="the output differs (section and PASS lines)"
    fi
    if [ -n "$problem" ]; then
        failures=$((failures + 1))
        printf '%-28s DIFFERENT: %s\n' "$label" "$problem"
        echo "    --- libdispatch (status $ref_status) / +++ grandcentral-run (status $gc_status):"
        { diff -u "$ref.out" "$gc.out" || true; } | sed -n '3,40p' | sed 's/^/    /'
        echo "    grandcentral-run's stderr:"
        sed -n '1,20p' "$gc.err" | sed 's/^/    /'
    else
        printf '%-28s same (%s, status %d)\n' "$label" "$mode" "$ref_status"
    fi
}

for name in "${c_tests[@]}"; do run_one "c/$name" sections "$out/$name"; done
for name in "${status_only[@]}"; do run_one "c/$name" status "$out/$name"; done
run_one "swift/async-main" output "$out/dropin-async"
for case in dispatch-main run-loop operation-queue process readability sources dispatch-io \
            notifications url-session; do
    run_one "swift/$case" output "$out/dropin-cases" "$case"
done

# A client bug ends the process with the BUG IN CLIENT line and SIGILL, as libdispatch's
# client crashes do (its trap); the misuse test above accepts either, so say it here.
bug_status=0
cat >"$out/bug.c" <<'EOF'
#include <dispatch/dispatch.h>
int main(void) { dispatch_group_leave(dispatch_group_create()); return 0; }
EOF
"$swift_root/bin/clang" -fblocks -I"$swift_root/lib/swift" "$out/bug.c" -o "$out/bug" \
    -L"$toolchain_lib" -Wl,-rpath,"$toolchain_lib" -ldispatch
SWIFT_BACKTRACE=enable=no "$run" "$out/bug" 2>"$out/bug.err" || bug_status=$?
if [ "$bug_status" -ne $((128 + 4)) ] || ! grep -q '^GrandCentral: BUG IN CLIENT: dispatch_group_leave: ' "$out/bug.err"; then
    failures=$((failures + 1))
    echo "client bug                   DIFFERENT: want the BUG IN CLIENT line and SIGILL (status 132), got status $bug_status:"
    sed 's/^/    /' "$out/bug.err"
else
    echo "client bug                   BUG IN CLIENT line, then SIGILL (status 132)"
fi

# Fork (tests/dropin/fork.c): a busy parent forks ten times and each child uses dispatch
# (queues, a group, dispatch_after, a timer source). Through grandcentral-run only: on the
# toolchain's libdispatch such a child hangs (or crashes), so there is nothing to compare.
"$swift_root/bin/clang" -fblocks -O2 -I"$swift_root/lib/swift" "$root_dir/tests/dropin/fork.c" -o "$out/fork" \
    -L"$toolchain_lib" -Wl,-rpath,"$toolchain_lib" -ldispatch
if fork_out=$(timeout 120 "$run" "$out/fork" 2>&1); then
    echo "fork                         $fork_out"
else
    failures=$((failures + 1))
    echo "fork                         FAILED through grandcentral-run: $fork_out"
fi

# One runtime per process: a program linked with libgrandcentral.so.0 that also loads
# libdispatch.so gets one copy of GrandCentral through grandcentral-run (the drop-in's
# directory holds libgrandcentral.so.0 as a link to libdispatch.so, and the loader maps one
# file once): both names give the same dispatch_async_f, and one GrandCentral image is mapped.
cat >"$out/both.c" <<'EOF'
#include <dispatch/dispatch.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    void *handle = dlopen("libdispatch.so", RTLD_NOW);
    if (!handle) { printf("dlopen: %s\n", dlerror()); return 1; }
    int same = dlsym(handle, "dispatch_async_f") == (void *)dispatch_async_f;
    int images = 0;
    char line[4096];
    FILE *maps = fopen("/proc/self/maps", "r");
    while (maps && fgets(line, sizeof line, maps))
        if (strstr(line, " r-xp ") && (strstr(line, "/libdispatch.so") || strstr(line, "/libgrandcentral.so")))
            images++;
    printf("same dispatch_async_f %d, executable images %d\n", same, images);
    return !(same && images == 1);
}
EOF
gcc -I"$prefix/include" "$out/both.c" -o "$out/both" -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -lgrandcentral -ldl
if both=$("$run" "$out/both" 2>&1); then
    echo "one runtime                  libgrandcentral.so.0 and libdispatch.so: one copy ($both)"
else
    failures=$((failures + 1))
    echo "one runtime                  DIFFERENT: two copies of GrandCentral through grandcentral-run: $both"
fi

[ "$failures" -eq 0 ] || die "$failures program(s) behave differently on GrandCentral"
echo "check-dropin: every program behaved the same on libdispatch and through grandcentral-run"
