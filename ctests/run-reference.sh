#!/usr/bin/env bash
# Builds the C conformance tests against the Swift toolchain's libdispatch (clang -fblocks,
# GC_REFERENCE_LIBDISPATCH defined) and runs them: evidence that what each test expects
# is what GCD does. GrandCentral-only promises are relaxed in that build (see check.h):
# the exact BUG IN CLIENT message, the main queue drained on the main thread, and a
# plausible dispatch_benchmark_f result (libdispatch's is broken on Linux).
#
#   ctests/run-reference.sh [test ...]     (default: every test)
#   SWIFT_ROOT=/opt/swift/usr ctests/run-reference.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
swift_root="${SWIFT_ROOT:-/opt/swift/usr}"
clang="$swift_root/bin/clang"
libdir="$swift_root/lib/swift/linux"
out="$(mktemp -d /tmp/gc-ctests-reference.XXXXXX)"
trap 'rm -rf "$out"' EXIT

if [ "$#" -gt 0 ]; then
  tests=("$@")
else
  tests=()
  for source in "$here"/*.c; do
    name="$(basename "$source" .c)"
    [ "$name" = header_matrix ] && continue
    tests+=("$name")
  done
fi

# The fault tests' LD_PRELOAD shims (fault_child.h), built once into $out.
for shim in "$here"/shim_*.c; do
  [ -e "$shim" ] || continue
  "$clang" -shared -fPIC -O2 -std=c11 "$shim" -o "$out/$(basename "$shim" .c).so" -ldl -pthread
done
export GC_SHIM_DIR="$out"

passed=0
failed=()
# Process and vnode sources do not exist in libdispatch on Linux (their source types are
# declared unavailable and not exported), so those tests cannot build against it.
no_reference=(source_proc source_vnode)

for name in "${tests[@]}"; do
  # libdispatch ends a dispatch_sync onto a run-loop queue from another thread with a trap
  # (__DISPATCH_WAIT_FOR_QUEUE__); GrandCentral runs it on the loop's thread.
  if [ "$name" = runloop_sync ]; then
    printf '%-16s skipped (libdispatch traps on a dispatch_sync onto a run-loop queue)\n' "$name"
    continue
  fi
  if [[ " ${no_reference[*]} " == *" $name "* ]]; then
    printf '%-16s skipped (libdispatch on Linux has no such source type)\n' "$name"
    continue
  fi
  if ! "$clang" -fblocks -std=c11 -O2 -g -DGC_REFERENCE_LIBDISPATCH \
      -I"$swift_root/lib/swift" -I"$here" "$here/$name.c" -o "$out/$name" \
      -L"$libdir" -Wl,-rpath,"$libdir" -ldispatch -lBlocksRuntime -pthread 2>"$out/$name.build"; then
    printf '%-16s BUILD FAILED\n' "$name"
    sed 's/^/    /' "$out/$name.build"
    failed+=("$name")
    continue
  fi
  start=$(date +%s%N)
  if timeout 300 "$out/$name" >"$out/$name.log" 2>&1; then
    elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
    printf '%-16s pass  (%d.%03d s)\n' "$name" $((elapsed_ms / 1000)) $((elapsed_ms % 1000))
    passed=$((passed + 1))
  else
    printf '%-16s FAIL\n' "$name"
    sed 's/^/    /' "$out/$name.log" | tail -20
    failed+=("$name")
  fi
done

echo "libdispatch reference: $passed passed, ${#failed[@]} failed${failed:+ (${failed[*]})}"
[ "${#failed[@]}" -eq 0 ]
