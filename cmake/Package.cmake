# The Debian package: `cpack -G DEB` in the build directory (or `make package`) turns what
# `cmake --install` installs into build/libgrandcentral_<version>_<arch>.deb, rooted at /usr.
#
# One package, library and development files together: the shared library with its soname
# links, the headers, grandcentral.pc, the CMake package and the man pages. Paths inside it
# are this build's install paths under /usr: the Makefile configures CMAKE_INSTALL_LIBDIR=lib,
# so the library is /usr/lib/libgrandcentral.so.0 (on the loader's default path), not the
# multiarch directory. grandcentral.pc and the CMake package find their prefix from where
# they were installed, so the same files work under /usr and in a `dpkg -x` scratch root.
#
# Depends lists the Debian packages that own the libraries libgrandcentral.so NEEDs
# (`readelf -d`): libc6 (libc.so.6, with pthreads; the newest GLIBC_ symbol version it
# references is 2.34) and libblocksruntime0 (libBlocksRuntime.so.0). It needs no libbsd.
# The one it also needs, libswiftCore.so, is no Debian package's: the library's RUNPATH
# names the Swift toolchain's runtime directory, so the toolchain has to be installed there
# (the description says so). scripts/check-package.sh compares these claims with the
# built library and fails when they drift. The drop-in, lib/grandcentral/libdispatch.so,
# needs the toolchain's libBlocksRuntime.so and Swift runtime, both found through its
# RUNPATH (the toolchain's directory), so it adds no Depends.

set(GC_PACKAGE_MAINTAINER "GrandCentral maintainers <maintainers@users.noreply.a-seed-858fed81.example>"
    CACHE STRING "Maintainer field of the Debian package")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME libgrandcentral)
set(CPACK_PACKAGE_VENDOR GrandCentral)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Only what `cmake --install` installs: no components are split off.
set(CPACK_DEB_COMPONENT_INSTALL OFF)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${GC_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6 (>= 2.34), libblocksruntime0")
# A shlibs control file (libgrandcentral 0 libgrandcentral (>= version)) and the ldconfig
# trigger, as a Debian library package has.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

find_program(GC_DPKG dpkg)
if(GC_DPKG)
  execute_process(COMMAND ${GC_DPKG} --print-architecture
                  OUTPUT_VARIABLE CPACK_DEBIAN_PACKAGE_ARCHITECTURE
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()

set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Grand Central Dispatch for Linux, written in Swift (libdispatch-compatible C API)")
# CPackDeb writes the summary as the Description's first line and this text below it.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "libgrandcentral.so gives C programs libdispatch's interface (dispatch/dispatch.h):
queues, groups, semaphores, dispatch_once, timers and other sources, dispatch_data
and dispatch_io, with _f forms for plain C and block forms for clang -fblocks.
This one package holds the shared library, the headers, grandcentral.pc, the CMake
package (find_package(GrandCentral)) and the man pages, and the drop-in:
/usr/lib/grandcentral/libdispatch.so (GrandCentral under libdispatch's soname) with
grandcentral-run, which runs an unchanged toolchain-built program on it.

The library runs on the Swift runtime, which no Debian package provides: it looks
for libswiftCore.so in ${GC_SWIFT_RUNTIME} (its RUNPATH), so
the Swift toolchain must be installed there, or libswiftCore.so must be on the
loader's path (LD_LIBRARY_PATH or ld.so.conf).")

# `cpack -G TGZ --config CPackSourceConfig.cmake` should not sweep up build output.
set(CPACK_SOURCE_IGNORE_FILES "/\\\\.git/" "/build[^/]*/" "/prefix/" "/\\\\.build[^/]*/" "/bench/out/")
