import Glibc

/// A point in time as the file system stores it: seconds and nanoseconds since the Unix
/// epoch. The core does not import Foundation, so this stands where NSFileManager has `Date`.
public struct FileTimestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var seconds: Int64
    /// 0 ..< 1_000_000_000.
    public var nanoseconds: Int32

    public init(seconds: Int64, nanoseconds: Int32 = 0) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    public init(_ ts: timespec) {
        self.init(seconds: Int64(ts.tv_sec), nanoseconds: Int32(ts.tv_nsec))
    }

    /// The current time of the real-time clock.
    public static var now: FileTimestamp {
        var ts = Glibc.timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return FileTimestamp(ts)
    }

    /// The `utimensat` form.
    public var timespec: Glibc.timespec {
        Glibc.timespec(tv_sec: Int(seconds), tv_nsec: Int(nanoseconds))
    }

    public static func < (a: FileTimestamp, b: FileTimestamp) -> Bool {
        (a.seconds, a.nanoseconds) < (b.seconds, b.nanoseconds)
    }

    /// `SECONDS.NNNNNNNNN`: the form stored in `user.containerfs.creation-date`.
    public var description: String {
        let ns = String(nanoseconds)
        return "\(seconds)." + String(repeating: "0", count: max(0, 9 - ns.count)) + ns
    }

    /// Parses `description`'s form (a missing fraction means 0 ns); nil for anything else.
    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let first = parts.first, let s = Int64(first) else { return nil }
        var ns: Int32 = 0
        if parts.count == 2 {
            let digits = parts[1]
            guard !digits.isEmpty, digits.count <= 9, let v = Int32(digits) else { return nil }
            ns = v * Int32(pow10(9 - digits.count))
        }
        self.init(seconds: s, nanoseconds: ns)
    }
}

private func pow10(_ n: Int) -> Int {
    var r = 1
    for _ in 0..<n { r *= 10 }
    return r
}
