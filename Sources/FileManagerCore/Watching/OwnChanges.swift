import Glibc
import Synchronization
import SystemPackage

/// The changes the daemon is about to make to the store itself, so that the store watcher
/// can recognise their inotify echoes and not report them again (as kernel invalidations,
/// or later as uncoordinated presenter events).
///
/// An expectation is recorded *before* the system call (else the echo could be read first)
/// and matched by the first echo, which removes it. inotify merges identical consecutive
/// events, so expectations are not counted: several own changes may yield one echo, and an
/// extra echo costs only one needless invalidation. An expectation whose echo never comes
/// (the call failed, or made no event) expires after `lifetime`, so it can never hide a later
/// change made outside the mount for long.
public final class OwnChanges: Sendable {
    struct EntryKey: Hashable {
        let directory: UInt64
        let name: FilePath.Component
    }

    /// Nanoseconds an expectation waits for its echo.
    static let lifetime: UInt64 = 2_000_000_000

    private let entries = Mutex<[EntryKey: UInt64]>([:])
    /// Per item: how many echoes are still expected, and until when. Counted, because one
    /// request can make several (tar's chown, chmod and utimens are three IN_ATTRIB); a
    /// count inotify merged away expires with the deadline.
    private let items = Mutex<[UInt64: (count: Int, deadline: UInt64)]>([:])
    /// Off until a watcher runs: without one, recording would only grow the tables.
    let enabled = Atomic<Bool>(false)

    init() {}

    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    // MARK: - Recording (request handlers)

    /// An entry `name` of `directory` is about to appear, vanish or be replaced.
    func expectEntry(_ directory: UInt64, _ name: UnsafePointer<CChar>) {
        guard enabled.load(ordering: .relaxed), let component = FilePath.Component(platformString: name) else { return }
        let deadline = Self.now() + Self.lifetime
        entries.withLock { table in
            if table.count > 50_000 { Self.purge(&table) }
            table[EntryKey(directory: directory, name: component)] = deadline
        }
    }

    /// The item's attributes (or, at close, its data) are about to change.
    func expectItem(_ inode: UInt64) {
        guard enabled.load(ordering: .relaxed) else { return }
        let deadline = Self.now() + Self.lifetime
        items.withLock { table in
            if table.count > 50_000 { let now = Self.now(); table = table.filter { $0.value.deadline >= now } }
            table[inode] = ((table[inode]?.count ?? 0) + 1, deadline)
        }
    }

    func withdrawEntry(_ directory: UInt64, _ name: UnsafePointer<CChar>) {
        guard enabled.load(ordering: .relaxed), let component = FilePath.Component(platformString: name) else { return }
        _ = entries.withLock { $0.removeValue(forKey: EntryKey(directory: directory, name: component)) }
    }

    func withdrawItem(_ inode: UInt64) {
        guard enabled.load(ordering: .relaxed) else { return }
        items.withLock { table in
            guard let e = table[inode] else { return }
            table[inode] = e.count > 1 ? (e.count - 1, e.deadline) : nil
        }
    }

    /// Runs a change of the entry `name` of `directory`, expecting its echo; a failed change
    /// makes no echo, so its expectation is withdrawn (it would hide the next outside change).
    func expectingEntry<R>(_ directory: UInt64, _ name: UnsafePointer<CChar>, _ body: () throws(Errno) -> R) throws(Errno) -> R {
        expectEntry(directory, name)
        do { return try body() } catch {
            withdrawEntry(directory, name)
            throw error
        }
    }

    /// Runs a change of an item's attributes, expecting its echo (withdrawn on failure).
    func expectingItem<R>(_ inode: UInt64, _ body: () throws(Errno) -> R) throws(Errno) -> R {
        expectItem(inode)
        do { return try body() } catch {
            withdrawItem(inode)
            throw error
        }
    }

    // MARK: - Matching (the watcher)

    /// Whether an entry event is the echo of an expected change (and consumes it).
    func isOwnEntry(_ directory: UInt64, _ name: FilePath.Component) -> Bool {
        let now = Self.now()
        return entries.withLock { $0.removeValue(forKey: EntryKey(directory: directory, name: name)).map { $0 >= now } ?? false }
    }

    /// Whether a change of the entry `name` of `directory` is expected, without consuming
    /// it: an unlink echoes as IN_ATTRIB (link count) before its IN_DELETE.
    func expectsEntry(_ directory: UInt64, _ name: FilePath.Component) -> Bool {
        let now = Self.now()
        return entries.withLock { ($0[EntryKey(directory: directory, name: name)] ?? 0) >= now }
    }

    func isOwnItem(_ inode: UInt64) -> Bool {
        let now = Self.now()
        return items.withLock { table in
            guard let e = table[inode] else { return false }
            table[inode] = e.count > 1 ? (e.count - 1, e.deadline) : nil
            return e.deadline >= now
        }
    }

    private static func purge<K>(_ table: inout [K: UInt64]) {
        let now = Self.now()
        table = table.filter { $0.value >= now }
    }

    /// Forgets every expectation (after a queue overflow everything is rescanned anyway).
    func reset() {
        entries.withLock { $0.removeAll() }
        items.withLock { $0.removeAll() }
    }
}

extension Volume {
    /// Runs a change the daemon makes to the entry `name` of the directory `parent` outside
    /// a kernel request (a CLI command), expecting its echo from the store watcher.
    public func expectingOwnEntry(parent: UInt64, _ name: UnsafePointer<CChar>, _ body: () throws -> Void) throws {
        ownChanges.expectEntry(parent, name)
        do { try body() } catch {
            ownChanges.withdrawEntry(parent, name)
            throw error
        }
    }
}
