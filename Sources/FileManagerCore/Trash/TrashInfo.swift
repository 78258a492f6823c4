import Glibc
import SystemPackage

/// One `info/NAME.trashinfo` file of the FreeDesktop.org Trash specification 1.0:
///
///     [Trash Info]
///     Path=containers/com.example.notes/Documents/a%20b.txt
///     DeletionDate=2026-12-07T10:00:00
///
/// `Path` is percent-encoded bytes, relative to the volume's top directory (the mount
/// point); `DeletionDate` is local time without a zone. Info files are written by other
/// programs too (trash-cli, gio) and by anyone who owns the trash directory, so `parse`
/// treats them as untrusted input: anything `restore` could be led astray by is refused
/// there, with the reason (docs/DESIGN.md 51).
public struct TrashInfo: Sendable, Equatable {
    /// The original place, relative to the mount root: raw bytes, no leading `/`.
    public var path: [UInt8]
    /// Seconds since 1970 (local time as written, read back in local time).
    public var deletionDate: time_t

    public init(path: [UInt8], deletionDate: time_t) {
        self.path = path
        self.deletionDate = deletionDate
    }

    /// Why an info file cannot be used.
    public enum Problem: Error, Equatable, CustomStringConvertible {
        case notTrashInfo
        case missingPath
        case badEncoding
        case absolutePath
        case escapingPath
        case otherTrash
        case badDate

        public var description: String {
            switch self {
            case .notTrashInfo: return "not a trash info file (no [Trash Info] group)"
            case .missingPath: return "its Path= is missing"
            case .badEncoding: return "its Path= is not percent-encoded"
            case .absolutePath: return "its Path= is absolute (a file of this volume's trash names a path relative to the mount)"
            case .escapingPath: return "its Path= has '.' or '..' components or empty ones (it would lead out of its place)"
            case .otherTrash: return "its Path= leads into a trash directory"
            case .badDate: return "its DeletionDate= is not YYYY-MM-DDThh:mm:ss"
            }
        }
    }

    // MARK: Writing

    /// The file's bytes.
    public var encoded: [UInt8] {
        var data: [UInt8] = Array("[Trash Info]\nPath=".utf8)
        data.append(contentsOf: TrashInfo.percentEncoded(path))
        data.append(contentsOf: Array("\nDeletionDate=\(TrashInfo.formatDate(deletionDate))\n".utf8))
        return data
    }

    /// Bytes as the specification's URL escaping writes them (RFC 2396, as trash-cli's
    /// `quote(path, '/')` and GLib do): letters, digits, `-_.~` and `/` stay; everything
    /// else, newlines, `%` and bytes that are not UTF-8 included, becomes `%XX`.
    public static func percentEncoded(_ bytes: [UInt8]) -> [UInt8] {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        for b in bytes {
            switch b {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2D, 0x5F, 0x2E, 0x7E, 0x2F: out.append(b)
            default:
                out.append(0x25)
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 15)])
            }
        }
        return out
    }

    /// The bytes `%XX` sequences stand for; nil for a `%` not followed by two hex digits.
    public static func percentDecoded(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
        func digit(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: return c - 0x30
            case 0x41...0x46: return c - 0x41 + 10
            case 0x61...0x66: return c - 0x61 + 10
            default: return nil
            }
        }
        var out: [UInt8] = []
        var i = bytes.startIndex
        while i < bytes.endIndex {
            if bytes[i] == 0x25 {
                guard i + 2 < bytes.endIndex, let h = digit(bytes[i + 1]), let l = digit(bytes[i + 2]) else { return nil }
                out.append(h << 4 | l)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return out
    }

    /// `YYYY-MM-DDThh:mm:ss` in local time.
    public static func formatDate(_ t: time_t) -> String {
        var t = t
        var parts = tm()
        localtime_r(&t, &parts)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))"
    }

    /// The inverse of `formatDate`; nil when `text` is not in that form.
    public static func parseDate(_ text: String) -> time_t? {
        let digits = Array(text.utf8)
        guard digits.count == 19, digits[4] == 0x2D, digits[7] == 0x2D, digits[10] == 0x54, digits[13] == 0x3A, digits[16] == 0x3A
        else { return nil }
        func number(_ r: Range<Int>) -> Int32? {
            var v: Int32 = 0
            for c in digits[r] {
                guard (0x30...0x39).contains(c) else { return nil }
                v = v * 10 + Int32(c - 0x30)
            }
            return v
        }
        guard let y = number(0..<4), let mo = number(5..<7), let d = number(8..<10),
              let h = number(11..<13), let mi = number(14..<16), let s = number(17..<19),
              (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, s < 61 else { return nil }
        var parts = tm()
        parts.tm_year = y - 1900
        parts.tm_mon = mo - 1
        parts.tm_mday = d
        parts.tm_hour = h
        parts.tm_min = mi
        parts.tm_sec = s
        parts.tm_isdst = -1
        let t = mktime(&parts)
        return t == -1 ? nil : t
    }

    // MARK: Reading

    /// Empty, `.`, `..`, or holding a NUL: a component that leads out of its place.
    static func isUnsafeComponent(_ c: ArraySlice<UInt8>) -> Bool {
        let dot: UInt8 = 0x2E
        if c.isEmpty || c.contains(0) { return true }
        if c.count == 1 { return c.first == dot }
        return c.count == 2 && c.first == dot && c.last == dot
    }

    /// Reads an info file's bytes. Lines other than the `[Trash Info]` group's `Path` and
    /// `DeletionDate` are ignored, as the specification allows.
    public static func parse(_ data: [UInt8]) throws(Problem) -> TrashInfo {
        var inGroup = false, sawGroup = false
        var path: [UInt8]?
        var date: time_t?
        for rawLine in data.split(separator: 10, omittingEmptySubsequences: false) {
            var line = rawLine
            if line.last == 13 { line = line.dropLast() }
            if line.first == 0x5B {  // [
                inGroup = Array(line) == Array("[Trash Info]".utf8)
                if inGroup { sawGroup = true }
                continue
            }
            guard inGroup, let eq = line.firstIndex(of: 0x3D) else { continue }
            let key = Array(line[line.startIndex..<eq]), value = line[(eq + 1)...]
            if key == Array("Path".utf8), path == nil {
                guard let decoded = percentDecoded(value) else { throw .badEncoding }
                path = decoded
            } else if key == Array("DeletionDate".utf8), date == nil {
                guard let d = parseDate(String(decoding: value, as: UTF8.self)) else { throw .badDate }
                date = d
            }
        }
        guard sawGroup else { throw .notTrashInfo }
        guard let path, !path.isEmpty else { throw .missingPath }
        guard path.first != 0x2F else { throw .absolutePath }
        let components = path.split(separator: 0x2F, omittingEmptySubsequences: false)
        for c in components where TrashInfo.isUnsafeComponent(c) { throw .escapingPath }
        if let first = components.first, first.starts(with: Array(".Trash".utf8)) { throw .otherTrash }
        // A missing date is tolerated (some writers omit it): the item is then as old as 1970.
        return TrashInfo(path: path, deletionDate: date ?? 0)
    }
}
