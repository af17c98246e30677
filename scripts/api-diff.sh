#!/usr/bin/env bash
# Compares the public Swift surface of GrandCentral with the toolchain's Dispatch module and
# fails on any difference not documented in scripts/api-allowlist.txt.
#
#   scripts/api-diff.sh [MODULES_DIR]   (default: .build/debug/Modules, from `swift build`)
#
# Both modules go through the same path: `swift-symbolgraph-extract` (public declarations),
# then scripts/api-surface.py (one normalized line per declaration or conformance: name,
# labels, types, generic constraints, throws/rethrows, default arguments, closure attributes,
# availability that applies on Linux). The two lists are diffed; each line only one side has
# must match an allow-list pattern, and each pattern must match some line. It also checks
# that Aliases/DispatchAliases.swift aliases every public type and free function that both
# modules have.
# Output goes to build/api-diff/
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
swift_bin=$(dirname "$(readlink -f "$(command -v swift || echo /opt/swift/usr/bin/swift)")")
extract=$swift_bin/swift-symbolgraph-extract
toolchain_modules=$(cd "$swift_bin/../lib/swift/linux" && pwd)
modules=${1:-$root/.build/debug/Modules}
out=$root/build/api-diff
triple=$(uname -m)-unknown-linux-gnu

[ -f "$modules/GrandCentral.swiftmodule" ] || [ -d "$modules/GrandCentral.swiftmodule" ] \
    || { echo "api-diff: no GrandCentral.swiftmodule in $modules; run 'swift build' first" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out/Dispatch" "$out/GrandCentral"
"$extract" -module-name Dispatch -target "$triple" -I "$toolchain_modules" \
    -output-dir "$out/Dispatch" -minimum-access-level public >"$out/extract.log" 2>&1 \
    || { cat "$out/extract.log" >&2; echo "api-diff: cannot read Dispatch's symbol graph" >&2; exit 1; }
"$extract" -module-name GrandCentral -target "$triple" -I "$modules" \
    -I "$root/Sources/CGrandCentral/include" \
    -output-dir "$out/GrandCentral" -minimum-access-level public >>"$out/extract.log" 2>&1 \
    || { cat "$out/extract.log" >&2; echo "api-diff: cannot read GrandCentral's symbol graph" >&2; exit 1; }
python3 "$root/scripts/api-surface.py" "$out/Dispatch" Dispatch >"$out/Dispatch.txt"
python3 "$root/scripts/api-surface.py" "$out/GrandCentral" GrandCentral >"$out/GrandCentral.txt"

python3 - "$out/Dispatch.txt" "$out/GrandCentral.txt" "$root/scripts/api-allowlist.txt" \
    "$root/Aliases/DispatchAliases.swift" <<'PY'
import fnmatch, re, sys
dispatch_path, gc_path, allow_path, aliases_path = sys.argv[1:5]
dispatch = set(open(dispatch_path).read().splitlines())
gc = set(open(gc_path).read().splitlines())

def key(line):
    kind, _, rest = line.partition(" :: ")
    if kind in ("conformance", "inherits"):
        return rest
    return rest.split(" :: ")[0]

entries, reason = [], None
for number, raw in enumerate(open(allow_path), 1):
    line = raw.strip()
    if not line or line.startswith("#"):
        continue
    if line.startswith("reason:"):
        reason = line[len("reason:"):].strip()
        continue
    side, _, pattern = line.partition(" ")
    if side not in ("dispatch-only", "grandcentral-only") or not pattern or not reason:
        sys.exit(f"api-diff: {allow_path}:{number}: expected 'dispatch-only GLOB' or "
                 f"'grandcentral-only GLOB' after a 'reason:' line")
    entries.append([side, pattern, reason, 0])

failures = []
def check(lines, side, label):
    for line in sorted(lines):
        matched = [e for e in entries if e[0] == side and fnmatch.fnmatchcase(key(line), e[1])]
        for e in matched:
            e[3] += 1
        if not matched:
            failures.append(f"only in {label}: {line}")

check(dispatch - gc, "dispatch-only", "Dispatch")
check(gc - dispatch, "grandcentral-only", "GrandCentral")
allowed = sum(e[3] for e in entries)
for side, pattern, reason, uses in entries:
    if uses == 0:
        failures.append(f"allow-list entry matches nothing (remove it): {side} {pattern}")

# The alias file names every top-level type and free function of GrandCentral that Dispatch
# also has (only those are ambiguous beside Foundation; the alias file must also compile
# against Dispatch itself).
def top_level(lines):
    names = set()
    for line in lines:
        kind, _, rest = line.partition(" :: ")
        path = rest.split(" :: ")[0]
        if kind in ("swift.class", "swift.struct", "swift.enum", "swift.protocol", "swift.typealias") and "." not in path:
            names.add(path)
        elif kind == "swift.func":
            names.add(path.split("(")[0])
    return names
top = top_level(gc) & top_level(dispatch)
aliases = open(aliases_path).read()
for name in sorted(top):
    if not re.search(r"^(typealias %s\b|func %s\()" % (name, name), aliases, re.M):
        failures.append(f"Aliases/DispatchAliases.swift: no typealias or func for {name}")

print(f"api-diff: Dispatch {len(dispatch)} lines, GrandCentral {len(gc)} lines, "
      f"{len(dispatch & gc)} identical, {allowed} allow-listed differences")
for side, pattern, reason, uses in entries:
    if uses:
        print(f"  allowed ({uses:3d}) {side} {pattern}")
if failures:
    print("api-diff: FAILED: differences not on scripts/api-allowlist.txt:", file=sys.stderr)
    for f in failures:
        print("  " + f, file=sys.stderr)
    sys.exit(1)
print("api-diff: no undocumented difference")
PY
