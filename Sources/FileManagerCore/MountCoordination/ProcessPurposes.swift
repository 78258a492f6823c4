import Foundation
import Glibc
import Synchronization

/// Who a request through the mount is made for (docs/SEMANTICS.md §3.5): the calling
/// thread's process (thread group), or — when that process runs below a
/// `containerfs coordinate` command — the command's purpose, shared by all its children
/// (docs/SEMANTICS.md §3: "a coordinate command and its children share one purpose").
///
/// Resolved only when a conflicting claim or a presenter exists, never on the hot path:
/// it reads `/proc`.
public final class ProcessPurposes: Sendable {
    /// Live `coordinate` sessions: the command's pid → its purpose.
    private let sessions = Mutex<[Int32: Purpose]>([:])

    public init() {}

    public func beginSession(pid: Int32, purpose: Purpose) {
        sessions.withLock { $0[pid] = purpose }
    }

    public func endSession(pid: Int32) {
        sessions.withLock { $0[pid] = nil }
    }

    public var hasSessions: Bool { sessions.withLock { !$0.isEmpty } }

    /// The purpose of the kernel thread id `tid` (0: a request the kernel makes itself, which
    /// gets a purpose of its own).
    public func purpose(ofThread tid: Int32) -> Purpose {
        guard tid > 0 else { return .unique() }
        let tgid = Self.threadGroup(of: tid) ?? tid
        let known = sessions.withLock { $0 }
        if !known.isEmpty {
            // Walk up the parent chain to an enclosing `coordinate` command. The command makes
            // itself a child subreaper, so orphaned grandchildren stay below it.
            var pid = tgid
            for _ in 0..<64 {
                if let purpose = known[pid] { return purpose }
                guard let parent = Self.parent(of: pid), parent > 1 else { break }
                pid = parent
            }
        }
        return .process(tgid)
    }

    static func threadGroup(of tid: Int32) -> Int32? { statusField(tid, "Tgid:") }
    static func parent(of pid: Int32) -> Int32? { statusField(pid, "PPid:") }

    private static func statusField(_ pid: Int32, _ key: String) -> Int32? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(key) {
            return Int32(line.dropFirst(key.count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}
