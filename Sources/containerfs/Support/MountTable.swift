import Foundation

/// Reads /proc/self/mountinfo for ContainerFS mounts.
enum MountTable {
    struct Entry {
        let mountPoint: String
        let source: String
    }

    /// The `fuse.containerfs` mount at `path`, if any.
    static func entry(at path: String) -> Entry? {
        entries().last { $0.mountPoint == path }
    }

    static func entries() -> [Entry] {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let halves = line.components(separatedBy: " - ")
            guard halves.count == 2 else { return nil }
            let left = halves[0].split(separator: " "), right = halves[1].split(separator: " ")
            guard left.count >= 5, right.count >= 2, right[0] == "fuse.containerfs" else { return nil }
            return Entry(mountPoint: unescape(String(left[4])), source: unescape(String(right[1])))
        }
    }

    /// mountinfo escapes space, tab, newline and backslash as octal.
    static func unescape(_ s: String) -> String {
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

/// Runs a helper program and waits for it.
enum Subprocess {
    static func run(_ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }
}
