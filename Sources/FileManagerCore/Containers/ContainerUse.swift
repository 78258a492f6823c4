import Foundation
import Glibc

/// Which processes keep a container in use: those `containerfs run` started for it (and
/// the `run` process itself), recorded in the store's database by whoever writes it (the
/// daemon for any local user, through its control socket; the store's owner otherwise).
/// A record names a pid and the process's start time, so a pid reused by another process
/// does not count; records of processes gone are pruned whenever the list is read.
extension ContainerRegistry {
    /// The live processes `containerfs run` recorded for `id` (`container remove` refuses
    /// while there are any).
    public func runningPrograms(of id: BundleIdentifier) -> [pid_t] {
        guard prepareRunTable() else { return [] }
        let rows = (try? store.database.execute("SELECT pid, started FROM container_runs WHERE container = ? ORDER BY pid",
                                                [.text(id.rawValue)])) ?? []
        var alive: [pid_t] = []
        for row in rows {
            guard case .int(let pid) = row[0], case .int(let started) = row[1] else { continue }
            if Self.startTime(of: pid_t(pid)) == started {
                alive.append(pid_t(pid))
            } else {
                _ = try? store.database.execute("DELETE FROM container_runs WHERE container = ? AND pid = ?",
                                                [.text(id.rawValue), .int(pid)])
            }
        }
        return alive
    }

    /// Records that the live process `pid` uses the container `id` until it ends.
    public func recordRun(of id: BundleIdentifier, pid: pid_t) throws(FileManagerError) {
        guard record(id) != nil else { throw .noSuchItem("containers/\(id)") }
        guard let started = Self.startTime(of: pid) else { throw .noSuchItem("process \(pid)") }
        guard prepareRunTable() else { throw .system(.ioError, "\(store.path)/containerfs.db: cannot record the run") }
        do {
            try store.database.execute("INSERT OR REPLACE INTO container_runs (container, pid, started) VALUES (?, ?, ?)",
                                       [.text(id.rawValue), .int(Int64(pid)), .int(started)])
        } catch {
            throw .system(.ioError, "\(store.path)/containerfs.db: \(error)")
        }
    }

    /// Made on first use, not in the schema's migration: older stores get it too.
    private func prepareRunTable() -> Bool {
        (try? store.database.execute("""
            CREATE TABLE IF NOT EXISTS container_runs (
                container TEXT NOT NULL, pid INTEGER NOT NULL, started INTEGER NOT NULL,
                PRIMARY KEY (container, pid))
            """)) != nil
    }

    /// Field 22 of `/proc/PID/stat` (clock ticks since boot); nil when no such process.
    static func startTime(of pid: pid_t) -> Int64? {
        statFields(of: pid).flatMap { $0.count > 19 ? Int64($0[19]) : nil }
    }

    /// The parent of `pid`, for the daemon to check that a pid a client names is its child.
    public static func parent(of pid: pid_t) -> pid_t? {
        statFields(of: pid).flatMap { $0.count > 1 ? pid_t($0[1]) : nil }
    }

    /// The fields after the command name (which may hold spaces and parentheses): state first.
    private static func statFields(of pid: pid_t) -> [Substring]? {
        guard pid > 0, let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        return text[text.index(after: close)...].split(separator: " ")
    }
}
