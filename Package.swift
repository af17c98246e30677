// swift-tools-version:6.0
// The Swift face of GrandCentral: the engine and its Swift API, and the XCTest suite.
// The C ABI (GrandCentralExports, GrandCentralBlocks) is built by CMake only: the test
// binary links Foundation, hence the toolchain's libdispatch, and must never contain
// exported dispatch_* symbols (DESIGN.md, hard rule 2). The flags that keep _Concurrency
// out of libgrandcentral.so live in CMakeLists.txt; here they would forbid depending on
// this package by version (SwiftPM rejects unsafeFlags in dependencies). For the same reason
// only this build defines GRANDCENTRAL_EXECUTORS (queues as actor and task executors).
import PackageDescription

let package = Package(
    name: "GrandCentral",
    products: [
        .library(name: "GrandCentral", targets: ["GrandCentral"]),
    ],
    targets: [
        .target(
            name: "CGrandCentral",
            path: "Sources/CGrandCentral",
            cSettings: [.define("_GNU_SOURCE")]
        ),
        .target(
            name: "GrandCentral",
            dependencies: ["CGrandCentral"],
            path: "Sources/GrandCentral",
            // Queues as Swift concurrency executors (SwiftAPI/QueueExecutors.swift). They need
            // _Concurrency, so only this build has them; CMake's libgrandcentral.so does not.
            swiftSettings: [.define("GRANDCENTRAL_EXECUTORS")]
        ),
        // Counts heap allocations, for the tests that promise a hot path makes none
        // (Tests/CAllocationCounter/include/CAllocationCounter.h).
        .target(
            name: "CAllocationCounter",
            path: "Tests/CAllocationCounter"
        ),
        .testTarget(
            name: "GrandCentralTests",
            dependencies: ["GrandCentral", "CAllocationCounter"],
            path: "Tests/GrandCentralTests"
        ),
    ]
)
