#!/usr/bin/env bash
# Builds the Debian package from an existing CMake build and checks it the way a user of
# the .deb would meet it, without root and without touching /usr:
#
#   scripts/check-package.sh [BUILD_DIR]      (default: build; `make test` runs it)
#
#   1. `cpack -G DEB` makes BUILD_DIR/libgrandcentral_<version>_<arch>.deb; its control
#      fields (`dpkg-deb -f`) name the package, the project's version and this machine's
#      architecture.
#   2. Depends matches what the library NEEDs (`readelf -d`): every needed library that a
#      Debian package owns (`dpkg -S`) has that package in Depends, every package in
#      Depends owns one of them (so nothing is claimed that is not linked, libbsd0 say),
#      and the rest (the Swift runtime) sit in the library's RUNPATH, which the
#      Description names; libc6's minimum version covers the newest GLIBC_ symbol version
#      the library references (`objdump -T`).
#   3. The soname files: `dpkg-deb -c` lists libgrandcentral.so.<version> and the links
#      .so.0 -> .so.<version> and .so -> .so.0; the library's SONAME is the .so.0 link's
#      name, the shlibs control file names the same soname, and postinst runs ldconfig.
#   4. `dpkg -x` into a scratch root holds exactly what `cmake --install --prefix <tmp>`
#      installs (same paths under /usr, same link targets, same bytes).
#   5. examples/pipeline_f.c (gcc) and examples/pipeline_blocks.c (clang -fblocks) build
#      (scripts/examples-lib.sh; `make test` builds and runs the C examples only here)
#      against the scratch root through its grandcentral.pc (relocatable: its prefix is
#      found from ${pcfiledir}, so no PKG_CONFIG_SYSROOT_DIR), and examples/cmake-consumer
#      through its CMake package (CMAKE_PREFIX_PATH=<root>/usr); each runs with
#      LD_LIBRARY_PATH unset, and `ldd` resolves libgrandcentral.so.0 to the scratch
#      root's copy and loads one libBlocksRuntime.
# Any failure exits non-zero with a line saying what is wrong.
set -euo pipefail

root_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root_dir/build}

die() {
    echo "check-package: FAILED: $*" >&2
    exit 1
}

[ -f "$build/CPackConfig.cmake" ] || die "$build/CPackConfig.cmake is missing: configure and build first (make install)"
build=$(cd "$build" && pwd)
# shellcheck source=examples-lib.sh
. "$root_dir/scripts/examples-lib.sh"   # the C examples' build and linkage check

scratch=$(mktemp -d "${TMPDIR:-/tmp}/gc-package.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
root=$scratch/root            # dpkg -x
prefix=$scratch/prefix        # cmake --install
out=$scratch/out              # programs built against the root
mkdir -p "$root" "$prefix" "$out"

# --- 1. build the .deb -------------------------------------------------------------------
version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/CPackConfig.cmake")
[ -n "$version" ] || die "no CPACK_PACKAGE_VERSION in $build/CPackConfig.cmake (is cmake/Package.cmake included?)"
arch=$(dpkg --print-architecture)
rm -f "$build"/libgrandcentral_*.deb
(cd "$build" && cpack -G DEB --config CPackConfig.cmake) >"$scratch/cpack.log" 2>&1 \
    || { cat "$scratch/cpack.log" >&2; die "cpack -G DEB failed in $build"; }
deb=$build/libgrandcentral_${version}_${arch}.deb
[ -f "$deb" ] || { ls "$build"/*.deb >&2 2>/dev/null || true; die "cpack made no $deb"; }

field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = libgrandcentral ] || die "Package is '$(field Package)', want libgrandcentral"
[ "$(field Version)" = "$version" ] || die "Version is '$(field Version)', want the project's $version"
[ "$(field Architecture)" = "$arch" ] || die "Architecture is '$(field Architecture)', want $arch (dpkg --print-architecture)"
[ -n "$(field Maintainer)" ] || die "no Maintainer field"
depends=$(field Depends)
description=$(field Description)

# --- 2. Depends against what the library needs ---------------------------------------------
dpkg -x "$deb" "$root" || die "dpkg -x $deb failed"
library=$(find "$root" -name 'libgrandcentral.so.*.*' -type f | head -1)
[ -n "$library" ] || die "the package holds no libgrandcentral.so.<version> file"
dynamic=$(readelf -d "$library") || die "readelf -d cannot read $library"
runpath=$(sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p' <<<"$dynamic")
depends_names=$(tr ',' '\n' <<<"$depends" | sed 's/(.*)//; s/|.*//; s/[[:space:]]//g' | grep -v '^$' | sort -u)
resolved=$(ldd "$library" 2>&1) || die "ldd $library failed: $resolved"
owners=()
for needed in $(awk '/\(NEEDED\)/ { gsub(/[][]/, "", $NF); print $NF }' <<<"$dynamic"); do
    path=$(awk -v n="$needed" '$1 == n && $2 == "=>" { print $3 }' <<<"$resolved")
    if [ -z "$path" ]; then   # the dynamic loader itself: ldd prints its path alone
        path=$(awk -v n="$needed" 'index($1, "/" n) { print $1 }' <<<"$resolved")
    fi
    [ -n "$path" ] && [ "$path" != "not" ] || die "ldd cannot resolve $needed, which the library needs:"$'\n'"$resolved"
    owner=""
    for candidate in "$path" "$(readlink -f "$path")" "${path#/usr}" "/usr$path"; do
        owner=$(dpkg -S "$candidate" 2>/dev/null | head -1 | cut -d: -f1) && [ -n "$owner" ] && break
    done
    if [ -n "$owner" ]; then
        grep -qx "$owner" <<<"$depends_names" \
            || die "the library needs $needed (from Debian's $owner) but Depends is '$depends'"
        owners+=("$owner")
    else
        dir=$(dirname "$path")
        [[ ":$runpath:" == *":$dir:"* ]] \
            || die "$needed ($path) is no Debian package's and is not in the library's RUNPATH ($runpath)"
        grep -qF "$dir" <<<"$description" \
            || die "$needed comes from $dir (RUNPATH), which the package Description does not mention"
    fi
done
# The libc6 version in Depends covers the newest GLIBC_ symbol version the library uses.
glibc_used=$(objdump -T "$library" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -1)
glibc_claimed=$(tr ',' '\n' <<<"$depends" | sed -n 's/^ *libc6 *(>= *\([^)]*\)).*/\1/p')
[ -n "$glibc_claimed" ] || die "Depends gives libc6 no minimum version (the library uses GLIBC_$glibc_used): '$depends'"
dpkg --compare-versions "$glibc_claimed" ge "$glibc_used" \
    || die "Depends asks for libc6 (>= $glibc_claimed), but the library uses GLIBC_$glibc_used symbols"
for package in $depends_names; do
    printf '%s\n' "${owners[@]}" | grep -qx "$package" \
        || die "Depends claims $package, but no library libgrandcentral.so needs is in it (readelf -d: $(awk '/\(NEEDED\)/ { printf "%s ", $NF }' <<<"$dynamic"))"
done

# --- 3. the soname files -------------------------------------------------------------------
soname=$(sed -n 's/.*(SONAME).*\[\(.*\)\]$/\1/p' <<<"$dynamic")
[ "$soname" = libgrandcentral.so.0 ] || die "the library's SONAME is '$soname', want libgrandcentral.so.0"
contents=$(dpkg-deb -c "$deb")
libdir=$(dirname "${library#"$root"}")
real=$(basename "$library")
grep -qE "^-.* \.$libdir/$real\$" <<<"$contents" || die "dpkg-deb -c lists no file .$libdir/$real:"$'\n'"$contents"
grep -qE "^l.* \.$libdir/$soname -> $real\$" <<<"$contents" \
    || die "dpkg-deb -c lists no link .$libdir/$soname -> $real:"$'\n'"$contents"
grep -qE "^l.* \.$libdir/libgrandcentral\.so -> $soname\$" <<<"$contents" \
    || die "dpkg-deb -c lists no dev link .$libdir/libgrandcentral.so -> $soname:"$'\n'"$contents"
shlibs=$(dpkg-deb --ctrl-tarfile "$deb" | tar -xOf - ./shlibs 2>/dev/null) || die "the package has no shlibs control file"
[ "$shlibs" = "libgrandcentral 0 libgrandcentral (>= $version)" ] || die "shlibs is '$shlibs'"
postinst=$(dpkg-deb --ctrl-tarfile "$deb" | tar -xOf - ./postinst 2>/dev/null) || die "the package has no postinst"
grep -qw ldconfig <<<"$postinst" || die "postinst does not run ldconfig:"$'\n'"$postinst"

# --- 4. the same files as cmake --install ---------------------------------------------------
cmake --install "$build" --prefix "$prefix" >"$scratch/install.log" 2>&1 \
    || { cat "$scratch/install.log" >&2; die "cmake --install $build --prefix $prefix failed"; }
listing() {   # type, path, link target, checksum; one line per file or link under $1
    (cd "$1" && find . ! -type d -printf '%y %P %l\n' | sort | while read -r type path link; do
        if [ "$type" = f ]; then echo "f $path $(md5sum <"$path" | cut -d' ' -f1)"; else echo "$type $path -> $link"; fi
    done)
}
listing "$root/usr" >"$scratch/deb.list"
listing "$prefix" >"$scratch/install.list"
[ -s "$scratch/install.list" ] || die "cmake --install installed nothing"
diff -u --label "cmake --install (under the prefix)" --label "the .deb (under /usr)" \
    "$scratch/install.list" "$scratch/deb.list" >&2 \
    || die "the .deb does not hold exactly what cmake --install installs (diff above)"
[ -z "$(cd "$root" && find . ! -type d ! -path './usr/*')" ] || die "the .deb installs outside /usr: $(cd "$root" && find . ! -type d ! -path './usr/*')"

# --- 5. build and run examples against the scratch root --------------------------------------
pc=$(find "$root" -name grandcentral.pc | head -1)
[ -n "$pc" ] || die "the package holds no grandcentral.pc"
unset PKG_CONFIG_SYSROOT_DIR LD_LIBRARY_PATH
export PKG_CONFIG_PATH=$(dirname "$pc")
[ "$(pkg-config --variable=pcfiledir grandcentral)" = "$PKG_CONFIG_PATH" ] \
    || die "pkg-config found grandcentral.pc in $(pkg-config --variable=pcfiledir grandcentral), not in the scratch root"
gc_build_c_examples "$out" "$root/usr"

want=$root$libdir/$soname
while read -r program; do
    name=$(basename "$program")
    gc_check_links "$program" "$want"
    timeout 60 "$program" >"$scratch/$name.out" 2>&1 \
        || { status=$?; cat "$scratch/$name.out" >&2; die "$name, built against the scratch root, exited with status $status"; }
done < <(gc_c_examples "$out")

echo "check-package: $(basename "$deb"): Depends: $depends"
echo "check-package: soname $soname -> $real, shlibs and ldconfig trigger present; same $(wc -l <"$scratch/install.list") files as cmake --install"
echo "check-package: pipeline_f (gcc), pipeline_blocks (clang -fblocks) via grandcentral.pc and cmake-consumer via find_package built against a dpkg -x root, ran, and loaded its libgrandcentral"
