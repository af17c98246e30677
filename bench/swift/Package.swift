// swift-tools-version:6.0
// The Swift rows of the benchmark: the same source (Sources/BenchGrandCentral/main.swift)
// built twice, once importing GrandCentral and once Swift's Dispatch, run in separate
// processes by bench/run-swift.sh, which prints the ratio per case.
import PackageDescription

let package = Package(
    name: "SwiftBench",
    dependencies: [.package(name: "GrandCentral", path: "../..")],
    targets: [
        .executableTarget(name: "BenchGrandCentral",
                          dependencies: [.product(name: "GrandCentral", package: "GrandCentral")],
                          swiftSettings: [.define("BENCH_GRANDCENTRAL"), .unsafeFlags(["-Ounchecked"])]),
        .executableTarget(name: "BenchDispatch",
                          swiftSettings: [.unsafeFlags(["-Ounchecked"])]),
        // Not a benchmark: `make test` runs it (scripts/allocation-check.sh). It counts the
        // heap allocations of the Swift API's hot calls in a release build.
        .target(name: "CAllocationCounter"),
        .executableTarget(name: "AllocationCheck",
                          dependencies: [.product(name: "GrandCentral", package: "GrandCentral"),
                                         "CAllocationCounter"]),
    ]
)
