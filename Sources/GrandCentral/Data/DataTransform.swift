import Glibc

// dispatch_data_create_with_transform: re-encode a data object from one format to
// another. The formats fall in two families, and a transform stays within one:
//
//   binary  none (raw bytes), base32, base32hex, base64 (RFC 4648, with '=' padding);
//   text    utf8, utf16le, utf16be, and utf_any (input only: UTF-16 by its byte-order mark,
//           FF FE little-endian or FE FF big-endian, otherwise UTF-8).
//
// A transform is "decode the input format to the family's plain form (raw bytes, UTF-8),
// then encode that to the output format"; none and utf8 are the plain forms. none→none
// returns the input object itself; so does utf8→utf8 unless the input starts with a
// UTF-8 byte-order mark (EF BB BF), which UTF-8 output drops (once), whatever the input. The result is NULL when the
// formats are of different families, when utf_any is the output, when utf_any input is
// shorter than two bytes, or when the input is not valid in its format. Empty input gives
// empty output (after the family check).
//
// What counts as valid, and the exact bytes, are libdispatch's on Linux, observed with the
// toolchain's library (ctests/data_transform.c runs the same cases on both):
//
//   - base32/base64 decoding skips '\n', '\t' and ' ', rejects any other byte outside the
//     alphabet, treats '=' as a zero digit wherever it appears (counting it as padding),
//     emits bytes per complete group of 8 (resp. 4) digits, drops a trailing partial group,
//     and finally removes as many bytes as the padding count says: base64 one per '=',
//     base32 1/2/3/4 bytes for 1/3/4/6 '=' (other counts remove none). Where libdispatch
//     would remove more bytes than there are (e.g. "QQ=", a partial group with padding) it
//     reads out of bounds and crashes; here that input is invalid (NULL).
//   - base32hex decoding: libdispatch's table-size check rejects every digit (its decoder
//     returns NULL for any non-blank input); here it decodes the base32hex alphabet
//     0-9A-V the way base32 decodes its own, so encode and decode round-trip.
//   - UTF-16 output starts with a byte-order mark in the output's order (unless empty), and
//     a U+FEFF that starts the text is not written again after it. UTF-8 input is
//     read by the length its lead byte announces (a continuation byte or 0xF8-0xFF as lead
//     is invalid, as is a sequence cut short by the end), continuation bytes contribute
//     their low six bits unchecked, and code points 0xD800-0xDFFE are invalid.
//   - UTF-16 input of odd length is invalid; a leading mark in the input's own order is
//     dropped, a leading reversed mark is invalid, and an unpaired surrogate is invalid.
//
// The input is copied out once (a transform reads every byte and writes a new object, so
// sharing regions buys nothing); the output is one malloc'ed region.

/// A data format; the raw values are the `kind` word of the `_dispatch_data_format_type_*`
/// objects (GrandCentralBlocks/data_symbols.c).
enum DataFormat: Int {
    case none = 0, utf8, utf16le, utf16be, utfAny, base32, base32hex, base64

    var isText: Bool {
        switch self {
        case .utf8, .utf16le, .utf16be, .utfAny: return true
        default: return false
        }
    }
}

extension DataObject {
    /// `data` transformed from `input` to `output` (one count for the caller), or nil; see above.
    static func transform(_ data: Unmanaged<DataObject>, from input: DataFormat,
                          to output: DataFormat) -> Unmanaged<DataObject>? {
        let size = data.size
        var bytes = [UInt8](repeating: 0, count: size)
        bytes.withUnsafeMutableBytes { b in
            data._withUnsafeGuaranteedRef { $0.copyBytes(to: b.baseAddress!, from: 0, count: size) }
        }
        var input = input
        if input == .utfAny {
            guard size >= 2 else { return nil }
            input = bytes[0] == 0xFF && bytes[1] == 0xFE ? .utf16le
                : bytes[0] == 0xFE && bytes[1] == 0xFF ? .utf16be : .utf8
        }
        guard output != .utfAny, input.isText == output.isText else { return nil }
        if size == 0 { return .passUnretained(DataObject.empty) }

        var plain: [UInt8]
        switch input {
        case .none, .utf8: plain = bytes
        case .base32: guard let d = DataCodec.decodeBase32(bytes, DataCodec.base32Alphabet) else { return nil }; plain = d
        case .base32hex: guard let d = DataCodec.decodeBase32(bytes, DataCodec.base32hexAlphabet) else { return nil }; plain = d
        case .base64: guard let d = DataCodec.decodeBase64(bytes) else { return nil }; plain = d
        case .utf16le: guard let d = DataCodec.utf16ToUTF8(bytes, bigEndian: false) else { return nil }; plain = d
        case .utf16be: guard let d = DataCodec.utf16ToUTF8(bytes, bigEndian: true) else { return nil }; plain = d
        case .utfAny: return nil
        }

        let encoded: [UInt8]
        switch output {
        case .none:
            if input == .none { data.retainData(); return data }   // nothing to decode or encode
            encoded = plain
        case .utf8:
            if plain.starts(with: DataCodec.utf8Mark) {
                plain.removeFirst(DataCodec.utf8Mark.count)
            } else if input == .utf8 {
                data.retainData()   // nothing to decode, strip or encode
                return data
            }
            encoded = plain
        case .base32: encoded = DataCodec.encodeBase32(plain, DataCodec.base32Alphabet)
        case .base32hex: encoded = DataCodec.encodeBase32(plain, DataCodec.base32hexAlphabet)
        case .base64: encoded = DataCodec.encodeBase64(plain)
        case .utf16le: guard let e = DataCodec.utf8ToUTF16(plain, bigEndian: false) else { return nil }; encoded = e
        case .utf16be: guard let e = DataCodec.utf8ToUTF16(plain, bigEndian: true) else { return nil }; encoded = e
        case .utfAny: return nil
        }
        return makeCopy(from: encoded)
    }

    /// A data object holding a copy of `bytes` (empty gives `empty`).
    static func makeCopy(from bytes: [UInt8]) -> Unmanaged<DataObject> {
        bytes.withUnsafeBytes { makeCopy(bytes: $0.baseAddress, size: $0.count) }
    }
}

/// The codecs of the transforms, on byte arrays. Each decoder returns nil for invalid input.
enum DataCodec {
    static let base32Alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)
    static let base32hexAlphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUV".utf8)
    static let base64Alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let pad = UInt8(ascii: "=")
    /// U+FEFF in UTF-8.
    static let utf8Mark: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// Digit values by byte: -1 not a digit, -2 the pad character.
    private static func table(_ alphabet: [UInt8]) -> [Int8] {
        var t = [Int8](repeating: -1, count: 256)
        for (value, c) in alphabet.enumerated() { t[Int(c)] = Int8(value) }
        t[Int(pad)] = -2
        return t
    }
    private static let base32Table = table(base32Alphabet)
    private static let base32hexTable = table(base32hexAlphabet)
    private static let base64Table = table(base64Alphabet)

    @inline(__always) private static func isBlank(_ c: UInt8) -> Bool { c == 0x0A || c == 0x09 || c == 0x20 }

    /// The decoding loop of base 32 and base 64: skips blanks, looks each character up in
    /// `table` (returning nil at a character outside the alphabet), packs `bitsPerDigit` bits per
    /// digit, and after each `digitsPerGroup` digits appends the group's bytes (40 or 24
    /// bits: a whole number of bytes). A pad counts as a zero digit; the caller removes the
    /// bytes the pads stand for. Returns the bytes and the number of pads.
    private static func decodeGroups(_ input: [UInt8], table: [Int8], bitsPerDigit: Int,
                                     digitsPerGroup: Int) -> (bytes: [UInt8], pads: Int)? {
        let bytesPerGroup = bitsPerDigit * digitsPerGroup / 8
        var out: [UInt8] = []
        out.reserveCapacity(input.count * bitsPerDigit / 8)
        // Bits above the current group shift out or are never read (a smart shift).
        var group: UInt64 = 0, count = 0, pads = 0
        for c in input where !isBlank(c) {
            var v = table[Int(c)]
            if v == -1 { return nil }
            if v == -2 { v = 0; pads += 1 }
            group = group << UInt64(bitsPerDigit) | UInt64(v)
            count += 1
            if count % digitsPerGroup == 0 {
                for k in 0..<bytesPerGroup {
                    out.append(UInt8(truncatingIfNeeded: group >> UInt64(8 * (bytesPerGroup - 1 - k))))
                }
            }
        }
        return (out, pads)
    }

    /// The encoding loop of base 32 and base 64: each group of `bytesPerGroup` input bytes
    /// (40 or 24 bits; the last group padded with zero bits) becomes digits of
    /// `bitsPerDigit` bits from `alphabet`, most significant first; the digits that carry
    /// no input bit are pads.
    private static func encodeGroups(_ input: [UInt8], _ alphabet: [UInt8], bitsPerDigit: Int,
                                     bytesPerGroup: Int) -> [UInt8] {
        let groupBits = 8 * bytesPerGroup
        let digitsPerGroup = groupBits / bitsPerDigit
        let mask = UInt64(1) << UInt64(bitsPerDigit) - 1
        var out: [UInt8] = []
        out.reserveCapacity((input.count + bytesPerGroup - 1) / bytesPerGroup * digitsPerGroup)
        var i = 0
        while i < input.count {
            let n = min(bytesPerGroup, input.count - i)
            var group: UInt64 = 0
            for k in 0..<bytesPerGroup { group = group << 8 | UInt64(k < n ? input[i + k] : 0) }
            let digits = (8 * n + bitsPerDigit - 1) / bitsPerDigit   // digits that carry input bits
            for k in 0..<digitsPerGroup {
                let shift = UInt64(groupBits - bitsPerDigit * (k + 1))
                out.append(k < digits ? alphabet[Int(group >> shift & mask)] : pad)
            }
            i += bytesPerGroup
        }
        return out
    }

    static func encodeBase32(_ input: [UInt8], _ alphabet: [UInt8]) -> [UInt8] {
        encodeGroups(input, alphabet, bitsPerDigit: 5, bytesPerGroup: 5)
    }

    static func decodeBase32(_ input: [UInt8], _ alphabet: [UInt8]) -> [UInt8]? {
        let t = alphabet == base32Alphabet ? base32Table : base32hexTable
        guard let decoded = decodeGroups(input, table: t, bitsPerDigit: 5, digitsPerGroup: 8) else { return nil }
        var out = decoded.bytes
        let remove = [1: 1, 3: 2, 4: 3, 6: 4][decoded.pads] ?? 0
        if remove > out.count { return nil }
        out.removeLast(remove)
        return out
    }

    static func encodeBase64(_ input: [UInt8]) -> [UInt8] {
        encodeGroups(input, base64Alphabet, bitsPerDigit: 6, bytesPerGroup: 3)
    }

    static func decodeBase64(_ input: [UInt8]) -> [UInt8]? {
        guard let decoded = decodeGroups(input, table: base64Table, bitsPerDigit: 6, digitsPerGroup: 4) else {
            return nil
        }
        var out = decoded.bytes
        if decoded.pads > out.count { return nil }
        out.removeLast(decoded.pads)
        return out
    }

    /// UTF-8 to UTF-16 with a leading byte-order mark (none for empty input); a U+FEFF
    /// that starts the input is the input's own mark and is not repeated.
    static func utf8ToUTF16(_ input: [UInt8], bigEndian: Bool) -> [UInt8]? {
        if input.isEmpty { return [] }
        var out: [UInt8] = []
        out.reserveCapacity(2 + input.count * 2)
        func put(_ unit: UInt16) {
            if bigEndian { out.append(UInt8(unit >> 8)); out.append(UInt8(unit & 0xFF)) }
            else { out.append(UInt8(unit & 0xFF)); out.append(UInt8(unit >> 8)) }
        }
        put(0xFEFF)
        var i = 0
        while i < input.count {
            let lead = input[i]
            let length: Int
            var scalar: UInt32
            switch lead {
            case 0x00..<0x80: length = 1; scalar = UInt32(lead)
            case 0xC0..<0xE0: length = 2; scalar = UInt32(lead & 0x1F)
            case 0xE0..<0xF0: length = 3; scalar = UInt32(lead & 0x0F)
            case 0xF0..<0xF8: length = 4; scalar = UInt32(lead & 0x07)
            default: return nil
            }
            if i + length > input.count { return nil }
            for k in 1..<length { scalar = scalar << 6 | UInt32(input[i + k] & 0x3F) }
            i += length
            if scalar >= 0xD800 && scalar < 0xDFFF { return nil }
            if scalar == 0xFEFF && i == length { continue }
            if scalar >= 0x10000 {
                let v = scalar - 0x10000
                put(UInt16(truncatingIfNeeded: (v >> 10) & 0x3FF) + 0xD800)
                put(UInt16(truncatingIfNeeded: v & 0x3FF) + 0xDC00)
            } else {
                put(UInt16(truncatingIfNeeded: scalar))
            }
        }
        return out
    }

    /// UTF-16 to UTF-8; a leading mark in the input's order is dropped.
    static func utf16ToUTF8(_ input: [UInt8], bigEndian: Bool) -> [UInt8]? {
        if input.count % 2 != 0 { return nil }
        let units = input.count / 2
        func unit(_ k: Int) -> UInt16 {
            let a = UInt16(input[2 * k]), b = UInt16(input[2 * k + 1])
            return bigEndian ? a << 8 | b : b << 8 | a
        }
        var out: [UInt8] = []
        out.reserveCapacity(input.count)
        var k = 0
        if units > 0 {
            if unit(0) == 0xFFFE { return nil }
            if unit(0) == 0xFEFF { k = 1 }
        }
        while k < units {
            let u = unit(k)
            k += 1
            var scalar = UInt32(u)
            if u >= 0xD800 && u <= 0xDBFF {
                guard k < units else { return nil }
                let low = unit(k)
                k += 1
                guard low >= 0xDC00 && low <= 0xDFFF else { return nil }
                scalar = 0x10000 + ((UInt32(u) - 0xD800) << 10 | UInt32(low & 0x3FF))
            } else if u >= 0xDC00 && u <= 0xDFFF {
                return nil
            }
            switch scalar {
            case 0..<0x80:
                out.append(UInt8(scalar))
            case 0x80..<0x800:
                out.append(UInt8(0xC0 | scalar >> 6)); out.append(UInt8(0x80 | scalar & 0x3F))
            case 0x800..<0x10000:
                out.append(UInt8(0xE0 | scalar >> 12)); out.append(UInt8(0x80 | scalar >> 6 & 0x3F))
                out.append(UInt8(0x80 | scalar & 0x3F))
            default:
                out.append(UInt8(0xF0 | scalar >> 18)); out.append(UInt8(0x80 | scalar >> 12 & 0x3F))
                out.append(UInt8(0x80 | scalar >> 6 & 0x3F)); out.append(UInt8(0x80 | scalar & 0x3F))
            }
        }
        return out
    }
}
