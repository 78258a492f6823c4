import Synchronization

/// Who an access is made for. Accesses of the same purpose never wait for each other
/// (docs/SEMANTICS.md §3.5); everything else follows the conflict matrix (docs/SEMANTICS.md §3.1).
///
/// A purpose is one 64-bit word so that the claim table compares it without hashing or
/// allocating. The top two bits say where it came from (docs/SEMANTICS.md §3.5):
/// - `process(_:)`: a thread group seen through the mount (the daemon maps FUSE's thread
///   id to it), or a `containerfs coordinate` command together with its children;
/// - `unique()`: a fresh purpose, e.g. one per `FileCoordinator` without an identifier, so
///   that two coordinators of one process exclude each other as in Apple's API;
/// - `init(identifier:)`: an explicit `purposeIdentifier` (reverse-DNS or UUID string).
///   The string is hashed (FNV-1a, 62 bits), never interned: equal strings give equal
///   purposes in every process with no table that grows, and two different strings
///   collide with probability 2⁻⁶² — accepted, and the only cost would be two purposes
///   not blocking each other.
public struct Purpose: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    private static let payloadMask: UInt64 = (1 << 62) - 1
    private static let processTag: UInt64 = 1 << 62
    private static let uniqueTag: UInt64 = 2 << 62
    private static let namedTag: UInt64 = 3 << 62

    /// The purpose of a thread group (process id as the kernel reports `Tgid`).
    public static func process(_ pid: Int32) -> Purpose {
        Purpose(rawValue: processTag | (UInt64(UInt32(bitPattern: pid)) & payloadMask))
    }

    /// A purpose no other call of `unique()` in this process returns.
    public static func unique() -> Purpose {
        let n = purposeCounter.add(1, ordering: .relaxed).newValue
        return Purpose(rawValue: uniqueTag | (n & payloadMask))
    }

    /// The purpose named by a `purposeIdentifier`. Empty strings are refused .
    public init(identifier: String) throws(CoordinationError) {
        guard !identifier.isEmpty else { throw .invalidPurpose }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in identifier.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        self.rawValue = Self.namedTag | (hash & Self.payloadMask)
    }

    public var description: String {
        let payload = rawValue & Self.payloadMask
        switch rawValue & ~Self.payloadMask {
        case Self.processTag: return "process \(payload)"
        case Self.uniqueTag: return "unique #\(payload)"
        case Self.namedTag: return "named 0x\(String(payload, radix: 16))"
        default: return "raw \(payload)"
        }
    }
}

/// Source of `Purpose.unique()`; wraps after 2⁶² purposes, which no process reaches.
private let purposeCounter = Atomic<UInt64>(0)

/// A fresh random identifier in UUID form, for coordinators and presenters that were not
/// given one (Apple's default `purposeIdentifier` is also a unique string).
func makeRandomPurposeIdentifier() -> String {
    let a = UInt64.random(in: .min ... .max), b = UInt64.random(in: .min ... .max)
    func hex(_ v: UInt64, _ digits: Int) -> String {
        let s = String(v, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - s.count)) + s
    }
    let h = hex(a, 16) + hex(b, 16)
    let c = Array(h)
    return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-"
        + String(c[16..<20]) + "-" + String(c[20..<32])
}
