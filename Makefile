# GrandCentral's front door. On a fresh Debian machine with the Swift toolchain, gcc and
# make, `make demo` and `make test` do all of the set-up themselves.
#
#   make build     system packages (scripts/install-deps.sh), CMake configure, build
#   make install   build, then install into $(PREFIX) (default ./prefix)
#   make test      install, then: the man pages, the Swift API diff against Dispatch, swift
#                  test (XCTest), the release-build allocation check, ctest (C tests, the
#                  header matrix, the exports), the consumer checks (Swift examples,
#                  linkage), the drop-in check (scripts/check-dropin.sh) and the Debian
#                  package check (the C examples via pkg-config and CMake, against the .deb)
#   make package   build, then the Debian package build/libgrandcentral_<version>_<arch>.deb
#   make demo      install, build and run every example, then the benchmark
#   make bench     install, then bench/run.sh, the Swift rows (bench/run-swift.sh) and the
#                  drop-in rows (bench/run-dropin.sh: one Swift binary on each libdispatch.so)
#                  (BENCH_ARGS=--quick for a faster pass)
#   make sanitize  swift test under TSan and ASan, C tests against an ASan build
#   make clean     remove build output (build/, prefix/, .build/, bench/out/)

# The Swift toolchain lives in /opt/swift on the project's machines; find it even when a
# non-login shell (CI) has not put it on PATH.
ifneq ($(wildcard /opt/swift/usr/bin/swift),)
export PATH := /opt/swift/usr/bin:$(PATH)
endif

PREFIX     ?= $(CURDIR)/prefix
BUILD_DIR  ?= build
BENCH_ARGS ?=

# Every step runs in bash with -e and pipefail, so a failure anywhere stops make loudly.
SHELL       := /bin/bash
.SHELLFLAGS := -euo pipefail -c

run_bench = PREFIX="$(PREFIX)" bench/run.sh $(BENCH_ARGS) && bench/run-swift.sh $(BENCH_ARGS) \
    && PREFIX="$(PREFIX)" bench/run-dropin.sh $(BENCH_ARGS)
step = @printf '\n==> %s\n' $(1)

.PHONY: all deps build install package test demo bench sanitize clean help
all: build

help:
	@sed -n '1,16p' Makefile | sed 's/^# \{0,1\}//'

deps:
	@scripts/install-deps.sh

build: deps
	$(call step,"configure and build ($(BUILD_DIR)/)")
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	    -DCMAKE_INSTALL_PREFIX="$(PREFIX)" -DCMAKE_INSTALL_LIBDIR=lib
	cmake --build $(BUILD_DIR)

install: build
	$(call step,"install into $(PREFIX)")
	cmake --install $(BUILD_DIR) --prefix "$(PREFIX)"

# The .deb is cpack's, from the build directory (cmake/Package.cmake); it holds what
# `cmake --install` installs, under /usr.
package: build
	$(call step,"Debian package")
	rm -f $(BUILD_DIR)/libgrandcentral_*.deb
	cd $(BUILD_DIR) && cpack -G DEB --config CPackConfig.cmake
	@ls $(BUILD_DIR)/libgrandcentral_*.deb | sed 's/^/package: /'

test: install
	$(call step,"man pages: a page for every exported function (man -w) and lint clean")
	scripts/check-manpages.sh "$(PREFIX)"
	$(call step,"swift build --build-tests")
	swift build --build-tests --disable-swift-testing
	$(call step,"API diff: GrandCentral against the toolchain's Dispatch")
	scripts/api-diff.sh
	$(call step,"swift test (XCTest)")
	swift test --disable-swift-testing --skip-build
	$(call step,"Swift hot calls make no allocation (release build)")
	scripts/allocation-check.sh
	$(call step,"ctest (C tests, the header matrix, the exports; two at a time, RUN_SERIAL ones alone)")
	ctest --test-dir $(BUILD_DIR) --output-on-failure --no-tests=error -j2
	$(call step,"consumer checks (Swift consumer, linkage)")
	scripts/examples.sh check "$(PREFIX)"
	$(call step,"drop-in: toolchain-built C and Swift programs on libdispatch and through grandcentral-run")
	scripts/check-dropin.sh "$(PREFIX)"
	$(call step,"Debian package (cpack -G DEB, dpkg -x, examples built against it)")
	scripts/check-package.sh "$(BUILD_DIR)"
	$(call step,"make test: everything passed")

# TSan and ASan over the XCTest suite, and the C tests against an ASan build.
sanitize: deps
	scripts/sanitizers.sh

demo: install
	$(call step,"examples (built with pkg-config against $(PREFIX))")
	scripts/examples.sh run "$(PREFIX)"
	$(call step,"benchmark: GrandCentral vs the toolchain's libdispatch")
	$(run_bench)

bench: install
	$(call step,"benchmark: GrandCentral vs the toolchain's libdispatch")
	$(run_bench)

# Only the default prefix is removed: a PREFIX given on the command line may hold other things.
clean:
	rm -rf $(BUILD_DIR) build-asan $(CURDIR)/prefix .build .build-tsan .build-asan bench/out
