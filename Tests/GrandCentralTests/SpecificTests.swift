// Queue-specific data: setSpecific/getSpecific on a queue read back that queue's own value;
// DispatchQueue.getSpecific(key:) reads the current queue's, walking up its target chain.

import GrandCentral
import XCTest

private final class Token: Sendable {
    let name: String
    init(_ name: String) { self.name = name }
}

private struct Settings: Equatable {
    var depth: Int
    var name: String
}

final class SpecificTests: XCTestCase {

    func testValueSetOnAQueueIsReadBack() {
        let queue = DispatchQueue(label: "test.specific.readback")
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 42)
        XCTAssertEqual(queue.getSpecific(key: key), 42)
        let structKey = DispatchSpecificKey<Settings>()
        queue.setSpecific(key: structKey, value: Settings(depth: 2, name: "two"))
        XCTAssertEqual(queue.getSpecific(key: structKey), Settings(depth: 2, name: "two"))
    }

    func testMissingKeyIsNil() {
        let queue = DispatchQueue(label: "test.specific.missing")
        XCTAssertNil(queue.getSpecific(key: DispatchSpecificKey<Int>()))
    }

    func testKeysOfTheSameTypeAreDistinct() {
        let queue = DispatchQueue(label: "test.specific.distinct")
        let first = DispatchSpecificKey<String>()
        let second = DispatchSpecificKey<String>()
        queue.setSpecific(key: first, value: "first")
        queue.setSpecific(key: second, value: "second")
        XCTAssertEqual(queue.getSpecific(key: first), "first")
        XCTAssertEqual(queue.getSpecific(key: second), "second")
    }

    func testValuesBelongToTheirQueue() {
        let a = DispatchQueue(label: "test.specific.a")
        let b = DispatchQueue(label: "test.specific.b")
        let key = DispatchSpecificKey<String>()
        a.setSpecific(key: key, value: "a")
        XCTAssertEqual(a.getSpecific(key: key), "a")
        XCTAssertNil(b.getSpecific(key: key))
    }

    func testSettingAgainReplacesAndNilRemoves() {
        let queue = DispatchQueue(label: "test.specific.replace")
        let key = DispatchSpecificKey<String>()
        queue.setSpecific(key: key, value: "old")
        queue.setSpecific(key: key, value: "new")
        XCTAssertEqual(queue.getSpecific(key: key), "new")
        queue.setSpecific(key: key, value: nil)
        XCTAssertNil(queue.getSpecific(key: key))
    }

    func testCurrentQueuesValueInsideItsItems() {
        let queue = DispatchQueue(label: "test.specific.current")
        let concurrent = DispatchQueue(label: "test.specific.current.concurrent", attributes: .concurrent)
        let key = DispatchSpecificKey<String>()
        queue.setSpecific(key: key, value: "serial")
        concurrent.setSpecific(key: key, value: "concurrent")
        let seen = Recorder<String?>()
        queue.async { seen.append(DispatchQueue.getSpecific(key: key)) }
        concurrent.async { seen.append(DispatchQueue.getSpecific(key: key)) }
        concurrent.async(flags: .barrier) { seen.append(DispatchQueue.getSpecific(key: key)) }
        XCTAssertTrue(eventually { seen.count == 3 })
        XCTAssertEqual(Set(seen.values.compactMap { $0 }), ["serial", "concurrent"])
        XCTAssertEqual(seen.values.filter { $0 == "concurrent" }.count, 2)
        XCTAssertEqual(queue.sync { DispatchQueue.getSpecific(key: key) }, "serial")
        XCTAssertEqual(concurrent.sync { DispatchQueue.getSpecific(key: key) }, "concurrent")
    }

    func testNestedSyncSeesTheInnermostQueue() {
        let outer = DispatchQueue(label: "test.specific.outer")
        let inner = DispatchQueue(label: "test.specific.inner")
        let key = DispatchSpecificKey<String>()
        outer.setSpecific(key: key, value: "outer")
        inner.setSpecific(key: key, value: "inner")
        let seen = outer.sync { () -> [String?] in
            let before = DispatchQueue.getSpecific(key: key)
            let during = inner.sync { DispatchQueue.getSpecific(key: key) }
            let after = DispatchQueue.getSpecific(key: key)
            return [before, during, after]
        }
        XCTAssertEqual(seen, ["outer", "inner", "outer"])
    }

    func testNoValueOutsideAnyQueue() {
        let key = DispatchSpecificKey<Int>()
        DispatchQueue(label: "test.specific.elsewhere").setSpecific(key: key, value: 1)
        let seen = Recorder<Int?>()
        let thread = TestThread { seen.append(DispatchQueue.getSpecific(key: key)) }
        thread.join()
        XCTAssertEqual(seen.values, [nil])
        XCTAssertNil(DispatchQueue.getSpecific(key: key))
    }

    func testCurrentValueWalksTheTargetChain() {
        let root = DispatchQueue(label: "test.specific.chain.root")
        let middle = DispatchQueue(label: "test.specific.chain.middle", attributes: .concurrent, target: root)
        let leaf = DispatchQueue(label: "test.specific.chain.leaf", target: middle)
        let rootKey = DispatchSpecificKey<String>()
        let sharedKey = DispatchSpecificKey<String>()
        let leafKey = DispatchSpecificKey<String>()
        root.setSpecific(key: rootKey, value: "root")
        root.setSpecific(key: sharedKey, value: "root")
        middle.setSpecific(key: sharedKey, value: "middle")
        leaf.setSpecific(key: leafKey, value: "leaf")
        let seen = Recorder<[String?]>()
        leaf.async {
            seen.append([
                DispatchQueue.getSpecific(key: rootKey),
                DispatchQueue.getSpecific(key: sharedKey),
                DispatchQueue.getSpecific(key: leafKey),
            ])
        }
        middle.async {
            seen.append([
                DispatchQueue.getSpecific(key: rootKey),
                DispatchQueue.getSpecific(key: sharedKey),
                DispatchQueue.getSpecific(key: leafKey),
            ])
        }
        XCTAssertTrue(eventually { seen.count == 2 })
        XCTAssertEqual(Set(seen.values), [["root", "middle", "leaf"], ["root", "middle", nil]])
        XCTAssertEqual(leaf.sync { DispatchQueue.getSpecific(key: rootKey) }, "root")
    }

    /// The instance method reads only the queue's own value; it does not walk the chain.
    func testQueuesOwnValueDoesNotWalkTheTargetChain() {
        let root = DispatchQueue(label: "test.specific.own.root")
        let leaf = DispatchQueue(label: "test.specific.own.leaf", target: root)
        let key = DispatchSpecificKey<String>()
        root.setSpecific(key: key, value: "root")
        XCTAssertNil(leaf.getSpecific(key: key))
        XCTAssertNil(leaf.sync { leaf.getSpecific(key: key) })
    }

    func testValueSetBeforeActivationIsSeenByTheFirstItem() {
        let queue = DispatchQueue(label: "test.specific.inactive", attributes: .initiallyInactive)
        let key = DispatchSpecificKey<String>()
        let seen = Recorder<String?>()
        queue.async { seen.append(DispatchQueue.getSpecific(key: key)) }
        queue.setSpecific(key: key, value: "set while inactive")
        queue.activate()
        XCTAssertTrue(eventually { seen.count == 1 })
        XCTAssertEqual(seen.values, ["set while inactive"])
    }

    func testReplacedValueIsReleased() {
        let queue = DispatchQueue(label: "test.specific.release")
        let key = DispatchSpecificKey<Token>()
        weak var weakOld: Token?
        do {
            let old = Token("old")
            weakOld = old
            queue.setSpecific(key: key, value: old)
        }
        XCTAssertNotNil(weakOld)
        queue.setSpecific(key: key, value: Token("new"))
        XCTAssertEqual(queue.getSpecific(key: key)?.name, "new")
        XCTAssertTrue(eventually { weakOld == nil }, "the replaced value was never released")
    }

    func testValuesAreReleasedWithTheirQueue() {
        let key = DispatchSpecificKey<Token>()
        weak var weakToken: Token?
        do {
            let queue = DispatchQueue(label: "test.specific.queue.release")
            let token = Token("owned")
            weakToken = token
            queue.setSpecific(key: key, value: token)
            XCTAssertEqual(queue.sync { DispatchQueue.getSpecific(key: key)?.name }, "owned")
        }
        XCTAssertTrue(eventually { weakToken == nil }, "a released queue kept its specific value")
    }
}
