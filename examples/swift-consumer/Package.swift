// swift-tools-version:6.0
// Swift programs that use GrandCentral the way they would use Swift's Dispatch: the import
// changes, and beside `import Foundation` a copy of Aliases/DispatchAliases.swift (symlinked
// here) makes the plain Dispatch names mean GrandCentral's. Built and run by `make test`
// (scripts/examples.sh).
//
//   SwiftConsumer     everyday Dispatch code beside Foundation, Swift 6 language mode
//   SwiftConsumer5    the same source in Swift 5 language mode
//   AsyncMain         an `async` main: @MainActor work and GrandCentral's main queue share the main
//                     thread; an actor whose executor is a DispatchSerialQueue
//   RunLoopMain       a Foundation `RunLoop.main.run()` program that drains GrandCentral's main queue
//   DispatchMainTool  a command-line tool that ends in `dispatchMain()` (no Foundation)
import PackageDescription

let grandCentral: Target.Dependency = .product(name: "GrandCentral", package: "GrandCentral")

let package = Package(
    name: "SwiftConsumer",
    dependencies: [.package(name: "GrandCentral", path: "../..")],
    targets: [
        .executableTarget(name: "SwiftConsumer", dependencies: [grandCentral]),
        .executableTarget(name: "SwiftConsumer5", dependencies: [grandCentral],
                          swiftSettings: [.swiftLanguageMode(.v5)]),
        .executableTarget(name: "AsyncMain", dependencies: [grandCentral]),
        .executableTarget(name: "RunLoopMain", dependencies: [grandCentral]),
        .executableTarget(name: "DispatchMainTool", dependencies: [grandCentral]),
    ]
)
