#!/usr/bin/env python3
"""Prints a module's public Swift surface, one normalized line per declaration, from the
symbol graph `swift-symbolgraph-extract` wrote for it. Used by scripts/api-diff.sh to
compare GrandCentral with the toolchain's Dispatch; both go through the same code.

    api-surface.py SYMBOLGRAPH_DIR MODULE

A line is `kind :: path :: declaration :: [availability]` for a declaration, and
`conformance :: Type : Protocol [where …]` / `inherits :: Class : Superclass` for a
relationship. Normalized, so that only what a client can observe is compared:
  - clang-imported (`c:`) symbols are dropped: the C API is compared by the header checks;
  - parameter names that only the body sees (`execute work:` → `execute:`) are dropped;
  - `final` on a class and `override` on an initializer are dropped: a public class is not
    subclassable outside its module either way, and the overridden initializer is internal;
  - spellings of one type are unified: `-> ()` is `-> Void`, and the C typealiases Dispatch
    uses (`dispatch_time_t`, `dispatch_fd_t`) are their Swift types (`UInt64`, `Int32`), and
    `CountableRange` (a typealias) is `Range`;
  - availability is kept only where it applies on Linux (no platform, `*`, or `Swift`);
    macOS/iOS/tvOS/watchOS/visionOS version attributes have no effect here.
"""
import json
import re
import os
import sys

APPLE = {"macOS", "iOS", "tvOS", "watchOS", "visionOS", "macCatalyst",
         "macOSApplicationExtension", "iOSApplicationExtension"}

C_TYPEALIASES = {"dispatch_time_t": "UInt64", "dispatch_fd_t": "Int32",
                 "CountableRange": "Range"}  # the last a Swift typealias of the same type


def declaration(fragments):
    out = []
    for fragment in fragments:
        if fragment["kind"] == "internalParam":
            if out and out[-1].endswith(" ") and len(out) >= 2:
                out[-1] = out[-1][:-1]
            continue
        out.append(fragment["spelling"])
    text = " ".join("".join(out).split())  # one line: attributes may be on their own
    if text.startswith("final class "):
        text = text[len("final "):]
    if text.startswith("override "):
        text = text[len("override "):]
    text = text.replace("-> ()", "-> Void")
    for c_name, swift_name in C_TYPEALIASES.items():
        text = re.sub(r"\b%s\b" % c_name, swift_name, text)
    return text


def availability(entries):
    kept = []
    for entry in entries or []:
        if entry.get("domain") in APPLE:
            continue
        kept.append(json.dumps(entry, sort_keys=True))
    return "[" + ", ".join(kept) + "]"


def constraints(items):
    if not items:
        return ""
    parts = []
    for c in items:
        op = {"conformance": ":", "sameType": "==", "superclass": ":"}.get(c["kind"], c["kind"])
        parts.append(f"{c['lhs']} {op} {c['rhs']}")
    return " where " + ", ".join(sorted(parts))


def main():
    directory, module = sys.argv[1], sys.argv[2]
    symbols, relationships = {}, []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".symbols.json") or not name.startswith(module):
            continue
        with open(os.path.join(directory, name)) as f:
            graph = json.load(f)
        for symbol in graph["symbols"]:
            symbols[symbol["identifier"]["precise"]] = symbol
        relationships += graph.get("relationships", [])

    lines = set()
    for usr, symbol in symbols.items():
        if not usr.startswith("s:"):
            continue
        path = ".".join(symbol["pathComponents"])
        context = constraints(symbol.get("swiftExtension", {}).get("constraints"))
        lines.add(f"{symbol['kind']['identifier']} :: {path} :: "
                  f"{declaration(symbol['declarationFragments'])}{context} :: "
                  f"{availability(symbol.get('availability'))}")
    for rel in relationships:
        if rel["kind"] not in ("conformsTo", "inheritsFrom"):
            continue
        source = symbols.get(rel["source"])
        if source is None or not rel["source"].startswith("s:"):
            continue
        target = symbols.get(rel["target"])
        target_name = ".".join(target["pathComponents"]) if target else rel.get("targetFallback", rel["target"])
        for prefix in ("Swift.", module + "."):
            if target_name.startswith(prefix):
                target_name = target_name[len(prefix):]
        kind = "conformance" if rel["kind"] == "conformsTo" else "inherits"
        where = constraints(rel.get("swiftConstraints"))
        lines.add(f"{kind} :: {'.'.join(source['pathComponents'])} : {target_name}{where}")
    for line in sorted(lines):
        print(line)


if __name__ == "__main__":
    main()
