import Glibc
import SystemPackage

/// The operation journal of the trash (table `journal` of the store's database): a row is
/// written before a trash, restore or empty touches anything and deleted once it is whole.
/// A row found at the next open of the store (by a mount, or a command working on the
/// store directly) belongs to an operation a crash cut short, and `recover` settles it in
/// the store, before anything is served: each item ends where it was, or whole in the trash
/// with its info file, or gone (docs/DESIGN.md 50).
///
/// Names and paths are kept percent-encoded, as info files keep them: they are bytes.
struct TrashJournal {
    let database: MetadataDatabase

    enum Operation: String { case trash, restore, empty }

    struct Entry {
        var id: Int64
        var operation: Operation
        var uid: uid_t
        var name: [UInt8]
        var path: [UInt8]
    }

    static let schema = """
        CREATE TABLE IF NOT EXISTS journal (
            id INTEGER PRIMARY KEY,
            op TEXT NOT NULL,
            uid INTEGER NOT NULL,
            name TEXT NOT NULL,
            path TEXT NOT NULL,
            started REAL NOT NULL
        )
        """

    /// Records an operation about to begin; its id.
    func begin(_ operation: Operation, uid: uid_t, name: [UInt8], path: [UInt8]) throws(FileManagerError) -> Int64 {
        do {
            let rows = try database.execute(
                "INSERT INTO journal (op, uid, name, path, started) VALUES (?, ?, ?, ?, ?) RETURNING id",
                [.text(operation.rawValue), .int(Int64(uid)), .text(Self.text(name)), .text(Self.text(path)), .real(Double(time(nil)))])
            guard case .int(let id) = rows.first?.first else { throw FileManagerError.system(.ioError, "journal") }
            return id
        } catch {
            throw .system(.ioError, "containerfs.db: the journal cannot be written (\(error))")
        }
    }

    /// The trash name an operation settled on (a trash tries names until one is free).
    func rename(_ id: Int64, to name: [UInt8]) {
        _ = try? database.execute("UPDATE journal SET name = ? WHERE id = ?", [.text(Self.text(name)), .int(id)])
    }

    /// The operation is whole.
    func end(_ id: Int64) {
        _ = try? database.execute("DELETE FROM journal WHERE id = ?", [.int(id)])
    }

    func entries() -> [Entry] {
        let rows = (try? database.execute("SELECT id, op, uid, name, path FROM journal ORDER BY id")) ?? []
        return rows.compactMap { row in
            guard case .int(let id) = row[0], case .text(let op) = row[1], let operation = Operation(rawValue: op),
                  case .int(let uid) = row[2], case .text(let name) = row[3], case .text(let path) = row[4],
                  let n = TrashInfo.percentDecoded(Array(name.utf8)[...]), let p = TrashInfo.percentDecoded(Array(path.utf8)[...])
            else { return nil }
            return Entry(id: id, operation: operation, uid: uid_t(truncatingIfNeeded: uid), name: n, path: p)
        }
    }

    static func text(_ bytes: [UInt8]) -> String { String(decoding: TrashInfo.percentEncoded(bytes), as: UTF8.self) }

    /// Settles every operation a crash cut short, in the store itself (nothing is mounted
    /// yet, or the caller holds the store lock), and empties every trash's `expunged/`.
    /// Returns how many operations were settled.
    @discardableResult
    static func recover(_ store: Store) -> Int {
        let journal = TrashJournal(database: store.database)
        let entries = journal.entries()
        for entry in entries {
            if let trash = try? TrashDirectory(store: store, uid: entry.uid, creating: false) {
                settle(entry, in: trash)
            }
            journal.end(entry.id)
        }
        // What an empty moved aside is gone whatever happened next.
        if let stream = try? DirectoryStream.open(store.trashFD), let names = try? stream.allNames() {
            for name in names {
                guard let expunged = try? name.withName({ p throws(Errno) in
                    try Syscall.openat(store.trashFD, p, O_PATH | O_DIRECTORY | O_NOFOLLOW)
                }) else { continue }
                defer { Syscall.close(expunged) }
                if let inside = try? Syscall.openat(expunged, "expunged", O_PATH | O_DIRECTORY | O_NOFOLLOW) {
                    try? TreeRemoval.removeContents(of: inside)
                    Syscall.close(inside)
                }
            }
        }
        return entries.count
    }

    /// One operation, settled: a rename is the step that decides, and it either happened
    /// (the item is no longer where it came from) or not.
    private static func settle(_ entry: Entry, in trash: TrashDirectory) {
        let inFiles = (try? withCName(entry.name) { p throws(Errno) in try Syscall.fstatat(trash.files, p) }) != nil
        switch entry.operation {
        case .trash:
            // Not moved: the info file reserved for it goes, if it is the one written for
            // this item (another program may have taken the name meanwhile), or what a
            // crash between its O_EXCL creation and its write left of it (empty, or a
            // beginning of what it was to hold): such a file names no item and stayed for good.
            if !inFiles, isReservation(entry, in: trash) { trash.removeInfo(entry.name) }
        case .restore:
            // Moved out: its info file goes; still there: it stays whole in the trash.
            if !inFiles { trash.removeInfo(entry.name) }
        case .empty:
            if !inFiles { trash.removeInfo(entry.name) }
        }
    }
}

extension TrashJournal {
    /// Whether the info file of `entry.name` is the one this trash operation reserved: it
    /// names `entry.path`, or it is a beginning (possibly empty) of such a file.
    fileprivate static func isReservation(_ entry: Entry, in trash: TrashDirectory) -> Bool {
        if let info = trash.readInfo(entry.name), info.path == entry.path { return true }
        var head: [UInt8] = Array("[Trash Info]\nPath=".utf8)
        head.append(contentsOf: TrashInfo.percentEncoded(entry.path))
        guard let data = try? TrashDirectory.readRegularFile(trash.info, TrashNaming.infoName(entry.name), limit: head.count) else {
            return false
        }
        return head.starts(with: data)
    }
}

/// Runs `body` with `bytes` as a NUL-terminated C string.
@inline(__always)
func withCName<R, E: Error>(_ bytes: [UInt8], _ body: (UnsafePointer<CChar>) throws(E) -> R) throws(E) -> R {
    var name = bytes.map { CChar(bitPattern: $0) }
    name.append(0)
    let result: Result<R, E> = name.withUnsafeBufferPointer { p in
        do throws(E) { return .success(try body(p.baseAddress!)) } catch { return .failure(error) }
    }
    return try result.get()
}

extension Store {
    /// Settles the trash and snapshot operations a crash cut short (`TrashJournal.recover`,
    /// `Snapshots.recover`, which also removes expired snapshots): run by
    /// whoever opens the store with its lock, before anything else uses it.
    @discardableResult
    /// `deferringDeletion`: trees moved into `.staging/` stay there (the daemon deletes
    /// staging debris once it serves, `stagingDebris`).
    public func settleJournal(deferringDeletion: Bool = false) -> Int {
        TrashJournal.recover(self) + Snapshots.recover(self, deferred: deferringDeletion)
    }
}
