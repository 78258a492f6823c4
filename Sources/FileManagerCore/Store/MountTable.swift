import Foundation

/// Reads /proc/self/mountinfo for ContainerFS mounts: the CLI finds the mount a path is
/// under, the store lock tells a live holder from one whose mount is already gone.
public enum MountTable {
    public struct Entry: Sendable {
        public let mountPoint: String
        public let source: String
        /// "major:minor" of the mount's connection: tells it from a later mount at the same place.
        public let device: String
        public let type: String
    }

    /// The type ContainerFS mounts have; `-o subtype=` may not change it (DESIGN.md 13).
    public static let type = "fuse.containerfs"

    /// The `fuse.containerfs` mount at `path` if it is the topmost mount there: one under
    /// another mount is not reachable through `path`, and `fusermount3 -u path` would
    /// take down the one on top.
    public static func entry(at path: String) -> Entry? {
        guard let top = topmost(at: path), top.type == type else { return nil }
        return top
    }

    /// The topmost mount of any type at `path` (mountinfo lists later mounts last).
    public static func topmost(at path: String) -> Entry? {
        (read(anyType: true) ?? []).last { $0.mountPoint == path }
    }

    /// The topmost mount at `path` if it is a FUSE mount of any subtype (`-o subtype=NAME`
    /// makes it `fuse.NAME`); nil if there is none, or something else is mounted over it.
    public static func fuseEntry(at path: String) -> Entry? {
        guard let top = (read(anyType: true) ?? []).last(where: { $0.mountPoint == path }),
              top.type == "fuse" || top.type.hasPrefix("fuse.") else { return nil }
        return top
    }

    /// Every `fuse.containerfs` mount; empty when mountinfo cannot be read.
    public static func entries() -> [Entry] { read() ?? [] }

    /// Every `fuse.containerfs` mount, or nil when mountinfo cannot be read.
    public static func read(anyType: Bool = false) -> [Entry]? {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return nil }
        return text.split(separator: "\n").compactMap { line in
            let halves = line.components(separatedBy: " - ")
            guard halves.count == 2 else { return nil }
            let left = halves[0].split(separator: " "), right = halves[1].split(separator: " ")
            guard left.count >= 5, right.count >= 2, anyType || right[0] == type else { return nil }
            return Entry(mountPoint: unescape(String(left[4])), source: unescape(String(right[1])),
                         device: String(left[2]), type: String(right[0]))
        }
    }

    /// mountinfo escapes space, tab, newline and backslash as octal.
    public static func unescape(_ s: String) -> String {
        var out = [UInt8]()
        let b = Array(s.utf8)
        var i = 0
        while i < b.count {
            if b[i] == 92, i + 3 < b.count, let v = UInt8(String(decoding: b[(i + 1)...(i + 3)], as: UTF8.self), radix: 8) {
                out.append(v)
                i += 4
            } else {
                out.append(b[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

