import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// OperationQueue: dependencies, a width limit, completion blocks, waiting.
func operationQueueCase() {
    let queue = OperationQueue()
    queue.maxConcurrentOperationCount = 2
    let lock = NSLock()
    var log: [String] = []
    func note(_ s: String) { lock.lock(); log.append(s); lock.unlock() }
    let first = BlockOperation { note("first") }
    let second = BlockOperation { note("second") }
    second.addDependency(first)
    let third = BlockOperation { note("third") }
    third.addDependency(second)
    queue.addOperations([third, second, first], waitUntilFinished: true)
    say("operation queue: dependencies ran in order: \(log)")

    var running = 0
    var most = 0
    for _ in 0..<20 {
        queue.addOperation {
            lock.lock(); running += 1; most = max(most, running); lock.unlock()
            usleep(2000)
            lock.lock(); running -= 1; lock.unlock()
        }
    }
    queue.waitUntilAllOperationsAreFinished()
    say("operation queue: never more than 2 at once: \(most <= 2)")

    let serial = OperationQueue()
    serial.maxConcurrentOperationCount = 1
    var order: [Int] = []
    for i in 0..<50 { serial.addOperation { order.append(i) } }
    serial.waitUntilAllOperationsAreFinished()
    say("operation queue: serial order kept: \(order == Array(0..<50))")

    let done = DispatchSemaphore(value: 0)
    let op = BlockOperation { note("with completion") }
    op.completionBlock = { done.signal() }
    queue.addOperation(op)
    done.wait()
    say("operation queue: completion block ran")
}

/// Process with pipes for stdin, stdout and stderr, and a termination handler.
func processCase() {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", "read line; echo \"out: $line\"; echo 'err: to stderr' >&2; exit 3"]
    let input = Pipe(), output = Pipe(), error = Pipe()
    process.standardInput = input
    process.standardOutput = output
    process.standardError = error
    let terminated = DispatchSemaphore(value: 0)
    process.terminationHandler = { p in
        say("process: termination handler: status \(p.terminationStatus), reason \(p.terminationReason == .exit ? "exit" : "signal")")
        terminated.signal()
    }
    do { try process.run() } catch { say("process: run failed: \(error)"); exit(1) }
    input.fileHandleForWriting.write("hello\n".data(using: .utf8)!)
    try? input.fileHandleForWriting.close()
    let out = output.fileHandleForReading.readDataToEndOfFile()
    let err = error.fileHandleForReading.readDataToEndOfFile()
    terminated.wait()
    process.waitUntilExit()
    say("process: stdout \(String(decoding: out, as: UTF8.self).debugDescription)")
    say("process: stderr \(String(decoding: err, as: UTF8.self).debugDescription)")
    say("process: exit status \(process.terminationStatus)")

    // Many short processes, one after another.
    var statuses: [Int32] = []
    for i in 0..<10 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", "exit \(i)"]
        try! p.run()
        p.waitUntilExit()
        statuses.append(p.terminationStatus)
    }
    say("process: 10 exit statuses \(statuses)")
}

/// FileHandle.readabilityHandler on a pipe: every chunk arrives, in order. The case stops
/// when all the bytes are in, not at end of file: on Linux the toolchain's libdispatch never
/// calls the handler for the end of file once the writer closes (GrandCentral does).
func readabilityCase() {
    let pipe = Pipe()
    let expected = (0..<100).map { "line \($0)\n" }.joined()
    var received = Data()
    let finished = DispatchSemaphore(value: 0)
    let lock = NSLock()
    pipe.fileHandleForReading.readabilityHandler = { handle in
        let chunk = handle.availableData
        lock.lock(); defer { lock.unlock() }
        let wasShort = received.count < expected.utf8.count
        received.append(chunk)
        if wasShort && received.count >= expected.utf8.count { finished.signal() }
    }
    let writer = pipe.fileHandleForWriting
    DispatchQueue.global().async {
        for i in 0..<100 {
            writer.write("line \(i)\n".data(using: .utf8)!)
            if i % 10 == 0 { usleep(1000) }
        }
    }
    if finished.wait(timeout: .now() + 20) == .timedOut { say("readability: timed out"); exit(1) }
    pipe.fileHandleForReading.readabilityHandler = nil
    lock.lock()
    let text = String(decoding: received, as: UTF8.self)
    lock.unlock()
    say("readability: \(text.split(separator: "\n").count) lines, in order: \(text == expected)")
}

/// A signal source (SIGUSR1 sent to ourselves, three times) and a repeating timer source.
func sourcesCase() {
    // No SIG_IGN: libdispatch on Linux takes a signal through its own handler, which an
    // ignored signal never reaches. The signals are sent once the source is registered.
    let queue = DispatchQueue(label: "dropin.sources")
    let signals = DispatchSource.makeSignalSource(signal: SIGUSR1, queue: queue)
    var caught = 0
    let sawSignals = DispatchSemaphore(value: 0)
    signals.setEventHandler {
        caught += Int(signals.data)
        if caught >= 3 { sawSignals.signal() } else { kill(getpid(), SIGUSR1) }
    }
    signals.setRegistrationHandler { kill(getpid(), SIGUSR1) }
    signals.resume()
    if sawSignals.wait(timeout: .now() + 10) == .timedOut { say("sources: signals timed out"); exit(1) }
    signals.cancel()
    say("sources: caught SIGUSR1 \(caught) times")

    let timer = DispatchSource.makeTimerSource(queue: queue)
    var fires = 0
    let timerDone = DispatchSemaphore(value: 0)
    let start = DispatchTime.now()
    timer.schedule(deadline: .now() + .milliseconds(10), repeating: .milliseconds(10))
    timer.setEventHandler {
        fires += 1
        if fires == 5 { timer.cancel() }
    }
    timer.setCancelHandler { timerDone.signal() }
    timer.resume()
    timerDone.wait()
    let elapsed = DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds
    say("sources: timer fired \(fires) times, not early: \(elapsed >= 50_000_000)")

    let adds = DispatchSource.makeUserDataAddSource(queue: queue)
    var sum: UInt = 0
    let added = DispatchSemaphore(value: 0)
    adds.setEventHandler {
        sum += adds.data
        if sum == 5050 { added.signal() }
    }
    adds.resume()
    for i in 1...100 { adds.add(data: UInt(i)) }
    added.wait()
    say("sources: data-add merged to \(sum)")
}

/// DispatchIO: a random-access write then read of a file, and a stream read of a pipe.
func dispatchIOCase() {
    let path = NSTemporaryDirectory() + "dropin-io-\(getpid())"
    let queue = DispatchQueue(label: "dropin.io")
    let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
    let channel = DispatchIO(type: .random, fileDescriptor: fd, queue: queue) { _ in close(fd) }
    let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    let written = DispatchSemaphore(value: 0)
    bytes.withUnsafeBytes { raw in
        channel.write(offset: 0, data: DispatchData(bytes: raw), queue: queue) { done, _, error in
            if done { say("dispatch io: write done, error \(error)"); written.signal() }
        }
    }
    written.wait()
    var read = [UInt8]()
    let readDone = DispatchSemaphore(value: 0)
    channel.read(offset: 0, length: bytes.count, queue: queue) { done, data, error in
        if let data { read.append(contentsOf: data) }
        if done { say("dispatch io: read done, error \(error)"); readDone.signal() }
    }
    readDone.wait()
    channel.close()
    say("dispatch io: read back \(read.count) bytes, equal: \(read == bytes)")
    unlink(path)

    var fds: [Int32] = [0, 0]
    pipe(&fds)
    let stream = DispatchIO(type: .stream, fileDescriptor: fds[0], queue: queue) { _ in close(fds[0]) }
    stream.setLimit(lowWater: 1)
    var text = ""
    let streamDone = DispatchSemaphore(value: 0)
    stream.read(offset: 0, length: Int.max, queue: queue) { done, data, error in
        if let data, !data.isEmpty { text += String(decoding: Array(data), as: UTF8.self) }
        if done { streamDone.signal() }
    }
    DispatchQueue.global().async {
        for word in ["alpha ", "beta ", "gamma"] {
            _ = word.withCString { write(fds[1], $0, strlen($0)) }
            usleep(2000)
        }
        close(fds[1])
    }
    streamDone.wait()
    say("dispatch io: stream read \(text.debugDescription)")
}

/// NotificationCenter: synchronous delivery, delivery on OperationQueue.main from a
/// worker (a run loop drains it), observer removal.
func notificationsCase() {
    let center = NotificationCenter.default
    let name = Notification.Name("dropin.note")
    var got: [String] = []
    let observer = center.addObserver(forName: name, object: nil, queue: nil) { note in
        got.append(note.userInfo?["v"] as? String ?? "?")
    }
    center.post(name: name, object: nil, userInfo: ["v": "one"])
    center.post(name: name, object: nil, userInfo: ["v": "two"])
    say("notifications: delivered synchronously: \(got)")
    center.removeObserver(observer)
    center.post(name: name, object: nil, userInfo: ["v": "three"])
    say("notifications: none after removal: \(got.count == 2)")

    var onMain: [String] = []
    let mainObserver = center.addObserver(forName: name, object: nil, queue: .main) { note in
        onMain.append("\(note.userInfo?["v"] as? String ?? "?") on main: \(Thread.isMainThread)")
    }
    DispatchQueue.global().async {
        center.post(name: name, object: nil, userInfo: ["v": "from a worker"])
    }
    let deadline = Date().addingTimeInterval(10)
    while onMain.isEmpty && Date() < deadline {
        RunLoop.main.run(mode: .default, before: Date().addingTimeInterval(0.05))
    }
    center.removeObserver(mainObserver)
    say("notifications: on OperationQueue.main: \(onMain)")
}

/// URLSession on data: URLs: a completion handler, and async/await.
func urlSessionCase() {
    let done = DispatchSemaphore(value: 0)
    let url = URL(string: "data:text/plain;base64,R3JhbmRDZW50cmFs")!
    let task = URLSession.shared.dataTask(with: url) { data, response, error in
        let text = data.map { String(decoding: $0, as: UTF8.self) } ?? "nil"
        say("url session: \(text.debugDescription), MIME \(response?.mimeType ?? "nil"), error \(error == nil ? "none" : "\(error!)")")
        done.signal()
    }
    task.resume()
    if done.wait(timeout: .now() + 20) == .timedOut { say("url session: timed out"); exit(1) }

    let second = DispatchSemaphore(value: 0)
    Task {
        do {
            let (data, _) = try await URLSession.shared.data(from: URL(string: "data:,hello%20world")!)
            say("url session async: \(String(decoding: data, as: UTF8.self).debugDescription)")
        } catch {
            say("url session async: error \(error)")
        }
        second.signal()
    }
    if second.wait(timeout: .now() + 20) == .timedOut { say("url session async: timed out"); exit(1) }
}
