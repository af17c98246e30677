// swift-tools-version:6.0
// The drop-in rows of the benchmark: one ordinary Swift program, built against the
// toolchain's Dispatch and Swift concurrency like any other, run by bench/run-dropin.sh on
// the toolchain's libdispatch and on GrandCentral's drop-in libdispatch.so (through
// bin/grandcentral-run). Nothing here imports GrandCentral: the binary is the same file both
// times, only the library under it changes.
import PackageDescription

let package = Package(
    name: "DropinBench",
    targets: [
        .executableTarget(name: "DropinBench",
                          swiftSettings: [.unsafeFlags(["-Ounchecked"])]),
    ],
    swiftLanguageModes: [.v5]
)
