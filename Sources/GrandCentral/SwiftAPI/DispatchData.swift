import Glibc

// The Swift face of data objects, spelled like Swift's Dispatch `DispatchData` (plus
// `regions`, which Foundation adds to it). A value holds one count of an engine data
// object (Data/DataObject.swift) through a small reference, so copies of a value share it;
// `append` replaces the value's object with the concatenation, which shares both sides.

/// Holds one count of a data object for as long as Swift values refer to it.
final class DataReference: @unchecked Sendable {
    let object: Unmanaged<DataObject>
    /// Takes over the caller's count.
    init(owning object: Unmanaged<DataObject>) { self.object = object }
    deinit { object.releaseData() }

    @inline(__always)
    func withObject<R>(_ body: (DataObject) throws -> R) rethrows -> R {
        try object._withUnsafeGuaranteedRef(body)
    }
}

/// Something `withUnsafeBytes` can point at when the data is empty.
nonisolated(unsafe) private let emptyBytes = UnsafeMutableRawPointer.allocate(byteCount: 16, alignment: 16)

/// An immutable sequence of bytes held in one or more regions; a `RandomAccessCollection`
/// of `UInt8`. Appending and taking subdata share regions instead of copying bytes.
public struct DispatchData: RandomAccessCollection, @unchecked Sendable {
    public typealias Iterator = DispatchDataIterator
    public typealias Index = Int
    public typealias Indices = DefaultIndices<DispatchData>

    public static let empty: DispatchData = DispatchData(owning: .passUnretained(DataObject.empty))

    /// How the bytes passed to `init(bytesNoCopy:deallocator:)` are given back.
    public enum Deallocator {
        /// free(3)
        case free
        /// munmap(2)
        case unmap
        /// A closure, run on the queue (the default global queue when nil).
        case custom(DispatchQueue?, () -> Void)

        fileprivate var destructor: DataDestructor {
            switch self {
            case .free: return .free
            case .unmap: return .munmap
            case .custom(let queue, let body):
                return .function(closureBoxTrampoline, ClosureBox.retainedContext(body), queue)
            }
        }
    }

    let reference: DataReference

    init(owning object: Unmanaged<DataObject>) { reference = DataReference(owning: object) }

    /// Copies the bytes.
    @available(swift, deprecated: 4, message: "Use init(bytes: UnsafeRawBufferPointer) instead")
    public init(bytes buffer: UnsafeBufferPointer<UInt8>) {
        self.init(owning: DataObject.makeCopy(bytes: buffer.baseAddress, size: buffer.count))
    }

    /// Copies the bytes.
    public init(bytes buffer: UnsafeRawBufferPointer) {
        self.init(owning: DataObject.makeCopy(bytes: buffer.baseAddress, size: buffer.count))
    }

    /// Takes the bytes without copying; `deallocator` gives them back when no data shares them.
    @available(swift, deprecated: 4, message: "Use init(bytesNoCopy: UnsafeRawBufferPointer, deallocater: Deallocator) instead")
    public init(bytesNoCopy bytes: UnsafeBufferPointer<UInt8>, deallocator: Deallocator = .free) {
        self.init(owning: DataObject.make(bytes: bytes.baseAddress, size: bytes.count, destructor: deallocator.destructor))
    }

    /// Takes the bytes without copying; `deallocator` gives them back when no data shares them.
    public init(bytesNoCopy bytes: UnsafeRawBufferPointer, deallocator: Deallocator = .free) {
        self.init(owning: DataObject.make(bytes: bytes.baseAddress, size: bytes.count, destructor: deallocator.destructor))
    }

    /// The number of bytes.
    public var count: Int { reference.withObject { $0.size } }

    /// Calls `body` with the bytes as one contiguous buffer (flattening the data once).
    public func withUnsafeBytes<Result, ContentType>(
        body: (UnsafePointer<ContentType>) throws -> Result) rethrows -> Result {
        let map = DataReference(owning: reference.withObject { $0.contiguous() })
        return try map.withObject { m in
            let start = UnsafeRawPointer(m.bytes) ?? UnsafeRawPointer(emptyBytes)
            let pointer = start.bindMemory(to: ContentType.self, capacity: m.size / MemoryLayout<ContentType>.stride)
            return try withExtendedLifetime(map) { try body(pointer) }
        }
    }

    /// The pre-4.2 spelling, kept (unavailable) as Dispatch keeps it.
    @available(swift, obsoleted: 4.2, renamed: "enumerateBytes(_:)")
    public func enumerateBytes(block: (_ buffer: UnsafeBufferPointer<UInt8>, _ byteIndex: Int, _ stop: inout Bool) -> Void) {
        enumerateBytes(block)
    }

    /// Calls `block` with each region in order, and the index of its first byte; setting
    /// `stop` ends the enumeration.
    @available(swift 4.2)
    public func enumerateBytes(
        _ block: (_ buffer: UnsafeBufferPointer<UInt8>, _ byteIndex: Int, _ stop: inout Bool) -> Void) {
        reference.withObject { d in
            _ = d.forEachRegion { _, offset, bytes, size in
                var stop = false
                block(UnsafeBufferPointer(start: bytes.assumingMemoryBound(to: UInt8.self), count: size), offset, &stop)
                return !stop
            }
        }
    }

    @available(swift, deprecated: 4, message: "Use append(_: UnsafeRawBufferPointer) instead")
    public mutating func append(_ bytes: UnsafePointer<UInt8>, count: Int) {
        append(UnsafeRawBufferPointer(start: bytes, count: count))
    }

    /// Appends a copy of the bytes.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.baseAddress != nil, bytes.count > 0 else { return }
        append(DispatchData(bytes: bytes))
    }

    /// Appends `other`, sharing its regions.
    public mutating func append(_ other: DispatchData) {
        let joined = withExtendedLifetime((reference, other.reference)) {
            DataObject.concat(reference.object, other.reference.object)
        }
        self = DispatchData(owning: joined)
    }

    /// Appends a copy of the buffer's bytes.
    public mutating func append<SourceType>(_ buffer: UnsafeBufferPointer<SourceType>) {
        append(UnsafeRawBufferPointer(buffer))
    }

    private func copyBytesHelper(to pointer: UnsafeMutableRawPointer, from range: Range<Index>) {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "The range is outside the bounds of the data")
        reference.withObject { $0.copyBytes(to: pointer, from: range.lowerBound, count: range.count) }
    }

    @available(swift, deprecated: 4, message: "Use copyBytes(to: UnsafeMutableRawBufferPointer, count: Int) instead")
    public func copyBytes(to pointer: UnsafeMutablePointer<UInt8>, count: Int) {
        copyBytesHelper(to: pointer, from: 0..<count)
    }

    /// Copies the first `count` bytes into `pointer`.
    public func copyBytes(to pointer: UnsafeMutableRawBufferPointer, count: Int) {
        assert(count <= pointer.count, "Buffer too small to copy \(count) bytes")
        guard let base = pointer.baseAddress else { return }
        copyBytesHelper(to: base, from: 0..<count)
    }

    @available(swift, deprecated: 4, message: "Use copyBytes(to: UnsafeMutableRawBufferPointer, from: Range<Index>) instead")
    public func copyBytes(to pointer: UnsafeMutablePointer<UInt8>, from range: CountableRange<Index>) {
        copyBytesHelper(to: pointer, from: range)
    }

    /// Copies the bytes in `range` into `pointer`.
    public func copyBytes(to pointer: UnsafeMutableRawBufferPointer, from range: CountableRange<Index>) {
        assert(range.count <= pointer.count, "Buffer too small to copy \(range.count) bytes")
        guard let base = pointer.baseAddress else { return }
        copyBytesHelper(to: base, from: range)
    }

    /// Copies as many bytes of `range` (all bytes when nil) as fit in `buffer`; returns how many.
    public func copyBytes<DestinationType>(to buffer: UnsafeMutableBufferPointer<DestinationType>,
                                           from range: CountableRange<Index>? = nil) -> Int {
        let total = count
        guard total > 0 else { return 0 }
        let capacity = buffer.count * MemoryLayout<DestinationType>.stride
        let copyRange: Range<Index>
        if let range {
            guard !range.isEmpty else { return 0 }
            precondition(range.lowerBound >= 0 && range.lowerBound < total, "The range is outside the bounds of the data")
            precondition(range.upperBound >= 0 && range.upperBound <= total, "The range is outside the bounds of the data")
            copyRange = range.lowerBound..<(range.lowerBound + Swift.min(capacity, range.count))
        } else {
            copyRange = 0..<Swift.min(capacity, total)
        }
        guard !copyRange.isEmpty, let base = buffer.baseAddress else { return 0 }
        copyBytesHelper(to: UnsafeMutableRawPointer(base), from: copyRange)
        return copyRange.count
    }

    /// The byte at `index`.
    public subscript(index: Index) -> UInt8 {
        precondition(index >= 0 && index < count, "DispatchData index out of range")
        return reference.withObject { d in
            let (region, offset) = d.region(at: index)
            return region._withUnsafeGuaranteedRef { $0.bytes!.load(fromByteOffset: index - offset, as: UInt8.self) }
        }
    }

    public subscript(bounds: Range<Int>) -> Slice<DispatchData> {
        Slice(base: self, bounds: bounds)
    }

    /// The bytes in `range`, sharing this data's regions.
    public func subdata(in range: CountableRange<Index>) -> DispatchData {
        guard range.lowerBound >= 0 else { return .empty }   // as a huge size_t offset would
        return withExtendedLifetime(reference) {
            DispatchData(owning: DataObject.subrange(reference.object, offset: range.lowerBound, length: range.count))
        }
    }

    /// The region that holds byte `location`, and the index where it starts.
    public func region(location: Int) -> (data: DispatchData, offset: Int) {
        reference.withObject { d in
            guard location >= 0 && location < d.size else { return (.empty, d.size) }
            let (region, offset) = d.region(at: location)
            region.retainData()
            return (DispatchData(owning: region), offset)
        }
    }

    public var startIndex: Index { 0 }
    public var endIndex: Index { count }
    public func index(before i: Index) -> Index { i - 1 }
    public func index(after i: Index) -> Index { i + 1 }

    /// An iterator over the bytes (it flattens the data once).
    public func makeIterator() -> DispatchData.Iterator { DispatchDataIterator(_data: self) }
}

/// Iterates over the bytes of a `DispatchData`, through one contiguous mapping.
public struct DispatchDataIterator: IteratorProtocol, Sequence {
    public typealias Element = UInt8

    /// An iterator over `_data`.
    public init(_data: DispatchData) {
        map = DataReference(owning: _data.reference.withObject { $0.contiguous() })
        bytes = map.withObject { UnsafeRawPointer($0.bytes) }
        count = _data.count
        position = 0
    }

    public mutating func next() -> DispatchData.Element? {
        guard position < count, let bytes else { return nil }
        defer { position += 1 }
        return bytes.load(fromByteOffset: position, as: UInt8.self)
    }

    let map: DataReference
    let bytes: UnsafeRawPointer?
    let count: Int
    var position: Int
}

// MARK: - Regions (what Foundation adds to DispatchData)

extension DispatchData {
    /// One region of a `DispatchData`: its bytes, indexed as in the whole data.
    public struct Region: RandomAccessCollection, @unchecked Sendable {
        public typealias Index = DispatchData.Index
        public typealias Element = UInt8
        public typealias Indices = Range<Int>
        public typealias SubSequence = Slice<Region>

        let bytes: UnsafeBufferPointer<UInt8>
        let index: DispatchData.Index
        let owner: DispatchData

        public var regions: CollectionOfOne<Region> { CollectionOfOne(self) }

        public subscript(position: DispatchData.Index) -> UInt8 {
            precondition(index <= position && position < index + bytes.count, "Region index out of range")
            return bytes[position - index]
        }

        public var startIndex: DispatchData.Index { index }
        public var endIndex: DispatchData.Index { index + bytes.count }

        public func withUnsafeBytes<ResultType>(_ body: (UnsafeRawBufferPointer) throws -> ResultType) rethrows -> ResultType {
            try body(UnsafeRawBufferPointer(bytes))
        }
    }

    /// The regions in order. Each keeps its bytes alive.
    public var regions: [Region] {
        var regions = [Region]()
        reference.withObject { d in
            _ = d.forEachRegion { region, offset, bytes, size in
                region.retainData()
                let owner = DispatchData(owning: region)
                regions.append(Region(bytes: UnsafeBufferPointer(start: bytes.assumingMemoryBound(to: UInt8.self), count: size),
                                      index: offset, owner: owner))
                return true
            }
        }
        return regions
    }
}
