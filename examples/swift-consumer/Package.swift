// swift-tools-version:6.0
// A Swift program that uses GrandCentral the way it would use Swift's Dispatch: the only
// difference is the import. Built and run by `make test` (scripts/examples.sh).
import PackageDescription

let package = Package(
    name: "SwiftConsumer",
    dependencies: [.package(name: "GrandCentral", path: "../..")],
    targets: [
        .executableTarget(name: "SwiftConsumer", dependencies: [.product(name: "GrandCentral", package: "GrandCentral")]),
    ]
)
