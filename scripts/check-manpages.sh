#!/usr/bin/env bash
# Checks the manual pages installed in PREFIX (the `make test` step "man pages"):
#
#   1. every dispatch_* function that PREFIX/lib/libgrandcentral.so exports has a page:
#      `MANPATH=PREFIX/share/man man -w 3 <name>` finds a file inside PREFIX;
#   2. the page it finds documents it: the name is in that page's NAME or SYNOPSIS
#      section (so a link to the wrong page fails);
#   3. every installed page (and the grandcentral-run(1), dispatch(3) and grandcentral(7)
#      pages are among them)
#      is clean under `mandoc -T lint -W warning` and `groff -ww -z -mandoc`;
#   4. every link in man3/ points at a page that exists.
#
# Usage: scripts/check-manpages.sh PREFIX
set -euo pipefail

fail() { echo "check-manpages: FAIL: $*" >&2; exit 1; }

[ $# -eq 1 ] || { echo "usage: $0 PREFIX" >&2; exit 2; }
prefix=$(cd "$1" && pwd -P) || fail "no such prefix: $1"
lib="$prefix/lib/libgrandcentral.so"
mandir="$prefix/share/man"
[ -e "$lib" ] || fail "$lib is missing (run make install first)"
[ -d "$mandir/man3" ] || fail "$mandir/man3 is missing: the pages were not installed"

for tool in man mandoc groff nm; do
    command -v "$tool" >/dev/null 2>&1 || fail "$tool is not installed (scripts/install-deps.sh installs it)"
done
# Some minimized images replace man with a stub that only prints a notice.
if ! man --version 2>/dev/null | grep -q '^man '; then
    fail "'man' is not man-db's (man --version says: $(man --version 2>&1 | head -1))"
fi

# The page a name resolves to, following a symbolic link or a `.so` stub.
resolve_page() {
    local file
    file=$(readlink -f "$1")
    if head -1 "$file" | grep -q '^\.so '; then
        file=$(readlink -f "$mandir/$(head -1 "$file" | sed 's/^\.so  *//')")
    fi
    printf '%s\n' "$file"
}

# NAME and SYNOPSIS of an mdoc page: the function names it lists there.
documented_names() {
    awk '/^\.Sh /{ in_sec = ($2 == "NAME" || $2 == "SYNOPSIS"); next }
         in_sec && /^\.(Nm|Fn|Fo) / { print $2 }' "$1" | sed 's/[ ,]*$//' | sort -u
}

# 1 and 2: every exported function.
mapfile -t functions < <(nm -D --defined-only "$lib" | awk '$2 == "T" && $3 ~ /^dispatch_/ { print $3 }' | sort -u)
[ ${#functions[@]} -gt 0 ] || fail "nm found no dispatch_* function in $lib"

missing=()
for name in "${functions[@]}"; do
    # MANPATH alone decides where man looks; no user configuration, no pager.
    found=$(MANPATH="$mandir" MANOPT= man -w 3 "$name" 2>/dev/null | head -1) || true
    if [ -z "$found" ]; then
        missing+=("$name: man -w 3 finds no page")
        continue
    fi
    case "$found" in
        "$mandir"/*) ;;
        *) missing+=("$name: man -w found $found, outside $prefix"); continue ;;
    esac
    page=$(resolve_page "$found")
    [ -f "$page" ] || { missing+=("$name: $found leads to $page, which does not exist"); continue; }
    if ! documented_names "$page" | grep -qx "$name"; then
        missing+=("$name: resolves to ${page#"$mandir"/}, whose NAME and SYNOPSIS do not mention it")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    printf '  %s\n' "${missing[@]}" >&2
    fail "${#missing[@]} of ${#functions[@]} exported functions have no correct page"
fi

# 3: lint every installed page (not the links: each is its page).
lint_failures=0
pages=0
for page in "$mandir"/man1/*.1 "$mandir"/man3/*.3 "$mandir"/man7/*.7; do
    [ -L "$page" ] && continue
    [ -f "$page" ] || continue
    pages=$((pages + 1))
    if ! out=$(mandoc -T lint -W warning "$page" 2>&1) || [ -n "$out" ]; then
        echo "  mandoc -T lint: $out" >&2
        lint_failures=$((lint_failures + 1))
    fi
    out=$(groff -ww -z -mandoc "$page" 2>&1 || echo "groff exited non-zero")
    if [ -n "$out" ]; then
        echo "  groff -ww on ${page#"$mandir"/}: $out" >&2
        lint_failures=$((lint_failures + 1))
    fi
done
[ "$lint_failures" -eq 0 ] || fail "$lint_failures lint failure(s) in the installed pages"
for required in man1/grandcentral-run.1 man3/dispatch.3 man7/grandcentral.7; do
    [ -f "$mandir/$required" ] && [ ! -L "$mandir/$required" ] || fail "$mandir/$required is missing"
done

# 4: no dangling links.
links=0
for link in "$mandir"/man3/*.3 "$mandir"/man7/*.7; do
    [ -L "$link" ] || continue
    links=$((links + 1))
    [ -e "$link" ] || fail "${link#"$mandir"/} is a dangling link (-> $(readlink "$link"))"
done

echo "check-manpages: ${#functions[@]} exported functions each found by man -w on a page that documents them; $pages pages lint clean (mandoc, groff); $links links"
