import CSQLite
import Glibc
import Synchronization

/// The store's small metadata database: SQLite in WAL mode at `STORE/containerfs.db`
/// (docs/SEMANTICS.md §6). It holds what the file system cannot: container records, later snapshots
/// and the operation journal. The file system stays the source of truth for existence;
/// the database is reconciled against it at every open.
///
/// Sendable note: the connection is used under `lock` only.
public final class MetadataDatabase: @unchecked Sendable {
    private let db: OpaquePointer
    private let lock = Mutex(())

    public struct Failure: Error, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    public init(path: String) throws {
        var handle: OpaquePointer?
        // NOFOLLOW: the database itself is never reached through a link (`Store.asOwner`
        // covers its -wal and -shm, which SQLite opens by path too).
        let rc = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX | SQLITE_OPEN_NOFOLLOW, nil)
        guard rc == SQLITE_OK, let handle else {
            let msg = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            if let handle { sqlite3_close(handle) }
            throw Failure(message: "\(path): \(msg)")
        }
        db = handle
        sqlite3_busy_timeout(db, 5000)
        try execute("PRAGMA journal_mode=WAL")
        try execute("PRAGMA synchronous=FULL")
        try migrate()
    }

    deinit { sqlite3_close(db) }

    private func migrate() throws {
        try execute("""
            CREATE TABLE IF NOT EXISTS containers (
                id TEXT PRIMARY KEY NOT NULL,
                display_name TEXT NOT NULL,
                owner_uid INTEGER NOT NULL,
                created REAL NOT NULL
            )
            """)
        try execute(TrashJournal.schema)
        try execute(Snapshots.schema)
        try execute(Snapshots.manifestSchema)
        // Written only when it changes: a write at every open made every command that only
        // reads the store (list, export) pay a WAL commit and a checkpoint at close.
        if try execute("PRAGMA user_version").first?.first != .int(1) {
            try execute("PRAGMA user_version=1")
        }
    }

    /// A value bound to a statement parameter or read from a row.
    public enum Value: Sendable, Equatable {
        case int(Int64), real(Double), text(String), null
    }

    /// Runs one statement; returns its rows.
    @discardableResult
    public func execute(_ sql: String, _ arguments: [Value] = []) throws -> [[Value]] {
        try lock.withLock { _ in
            var stmt: OpaquePointer?
            guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK, let stmt else {
                throw Failure(message: "SQL error: \(String(cString: sqlite3_errmsg(db)))")
            }
            defer { sqlite3_finalize(stmt) }
            for (i, arg) in arguments.enumerated() {
                let idx = Int32(i + 1)
                switch arg {
                case .int(let v): sqlite3_bind_int64(stmt, idx, v)
                case .real(let v): sqlite3_bind_double(stmt, idx, v)
                case .text(let v): sqlite3_bind_text(stmt, idx, v, -1, csqlite_transient())
                case .null: sqlite3_bind_null(stmt, idx)
                }
            }
            var rows: [[Value]] = []
            while true {
                let rc = sqlite3_step(stmt)
                if rc == SQLITE_DONE { break }
                guard rc == SQLITE_ROW else {
                    throw Failure(message: "SQL error: \(String(cString: sqlite3_errmsg(db)))")
                }
                var row: [Value] = []
                for c in 0..<sqlite3_column_count(stmt) {
                    switch sqlite3_column_type(stmt, c) {
                    case SQLITE_INTEGER: row.append(.int(sqlite3_column_int64(stmt, c)))
                    case SQLITE_FLOAT: row.append(.real(sqlite3_column_double(stmt, c)))
                    case SQLITE_NULL: row.append(.null)
                    default: row.append(.text(String(cString: sqlite3_column_text(stmt, c))))
                    }
                }
                rows.append(row)
            }
            return rows
        }
    }
}
