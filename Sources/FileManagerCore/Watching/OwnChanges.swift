import Glibc
import Synchronization
import SystemPackage

/// The changes the daemon makes to the store itself, so that the store watcher can
/// recognise their inotify echoes and not report them again (as kernel invalidations, or
/// later as uncoordinated presenter events).
///
/// Entries (names appearing, vanishing, moving) are expected *before* the system call (else
/// the echo could be read first), counted per name, and each met by one echo; a failed call
/// withdraws its expectation. A change that may succeed without an echo (a rename between
/// two names of one file changes nothing and queues nothing) is bounded by the queue
/// position once its call returned (`until`; inotify queues an echo inside the call): an
/// event queued later is someone else's, and ends it.
///
/// Items (IN_CLOSE_WRITE, IN_ATTRIB) are recognised by *state*, not by counting echoes:
/// right after changing an item the daemon records its ctime, and an event is the daemon's
/// own only if the item still has exactly that ctime. Counting could not be made safe:
/// inotify merges identical consecutive events, some changes reach no directory watch at
/// all (a lone mtime or atime, a size, a hard link), and a RELEASE's close arrives after the
/// caller's close(2) returned, so an edit made in the store in between was taken for the
/// daemon's own and served stale. A ctime moves with every change, the daemon's or anyone's,
/// and the `fstat` that records it makes the next change get a distinct one (multigrain
/// timestamps); the window left is the microseconds between the daemon's change and its
/// `fstat`. A record that no echo meets is harmless: it matches only that exact state.
/// Data: a handle open for writing records the state at its open and after each write the
/// daemon makes through it, and its close only renews a record that still matches
/// (`closingItem`). Every record is marked with a position in the inotify queue, and an
/// event queued before the mark never matches it: the state recorded may include an outside
/// edit whose event the watcher has not read yet. A change the daemon makes (a setattr, a
/// creation, a truncation) is marked with the position before it (its own echo is queued
/// after); the records of an open and of a write match nothing until the handle's close
/// marks them with the position just before its `close(2)`, whose IN_CLOSE_WRITE is the
/// only echo they have. inotify merges an event identical to the unread one before it (the
/// IN_ATTRIBs of `chmod`, `chown`, `utimens` in a row): a change made on the state the
/// daemon's previous change left keeps that change's mark, so the merged echo, queued at
/// the first, still matches.
public final class OwnChanges: Sendable {
    struct EntryKey: Hashable {
        let directory: UInt64
        let name: FilePath.Component
    }

    /// Nanoseconds an expectation waits for its echo: long enough for a watcher that lags
    /// under load, short so that one never met hides an outside change only briefly.
    static let lifetime: UInt64 = 1_000_000_000

    /// Per entry: the echoes expected (`EntryExpectation`). Counted: a rename onto `h` and
    /// an unlink of `h` made before the watcher caught up are two echoes of one name (entry
    /// events never merge: consecutive ones on a name always differ).
    private let entries = Mutex<[EntryKey: EntryExpectation]>([:])
    struct EntryExpectation {
        /// Echoes expected, and how many of them remove or replace what the name held (an
        /// unlink, an rmdir, either name of a rename).
        var count = 0
        var removals = 0
        /// Changes still in their system call: their echoes may be queued at any position.
        var inFlight = 0
        /// Of `count`, finished changes that may have queued no echo, and the queue position
        /// when the last of them returned: their echoes, if any, were queued before it. The
        /// others' echoes are certain, and time alone bounds them. Kept apart: a certain
        /// change made after an uncertain one must not lift its bound (a coherence fuzzer:
        /// a rename between two names of one file, then an unlink of one, took the next
        /// outside creation of that name for an echo, and the mount never showed it).
        var uncertain = 0
        var until: UInt64 = 0
        var deadline: UInt64 = 0
        /// A queue position no echo expected here was queued before: the lowest of the
        /// changes' marks, taken before their system calls (0: some change has none). An
        /// event queued before it is an outside change of the name, made just before the
        /// daemon's own: taken for the echo, it hid that change (a coherence fuzzer: the
        /// store renamed a file over a hard link's name, the mount renamed that name on,
        /// and the link count of the displaced file's other name never fell, s26c-wb-142).
        var after: UInt64 = 0
        /// When the first expected change still unmatched began (`now()` before its system
        /// call), and the last one (echoes come in the order of their changes).
        var firstStartedAt: UInt64 = 0
        var lastStartedAt: UInt64 = 0

        /// Forgets the expected changes that began before `moment`, when the watch that
        /// reports the name began: their system calls may have returned before it, with no
        /// echo on it (an echo that does come is then reported as an outside change: an
        /// invalidation too many). All of them when the last began before; else the first
        /// (the others' times are not kept: they count as after). The time a change
        /// returned would not do: its thread may read the clock well after the store
        /// changed (183 µs after a watch began, seen, for an unlink with no echo on it).
        mutating func forgetStarted(before moment: UInt64) {
            guard count > 0, firstStartedAt < moment else { return }
            count -= lastStartedAt < moment ? count : 1
            inFlight = min(inFlight, count)
            removals = min(removals, count)
            uncertain = min(uncertain, count)
            firstStartedAt = lastStartedAt
        }

        /// Whether an event queued at `position` may be one of the expected echoes.
        func admits(_ position: UInt64, now: UInt64) -> Bool {
            count > 0 && deadline >= now && position >= after && (count > uncertain || position < until)
        }

        /// An event queued at `position`, past `until`: the uncertain changes' echoes came
        /// before it, or never will.
        mutating func spendUncertain(before position: UInt64) {
            guard uncertain > 0, position >= until else { return }
            count -= uncertain
            uncertain = 0
            removals = min(removals, count)
        }
    }
    /// Per item: how many of the daemon's own changes are in flight (a descriptor open for
    /// writing, a setattr or xattr change under way). An item whose state moved on while the
    /// daemon itself was changing it may have moved by the daemon's hand, not yet recorded.
    private let busy = Mutex<[UInt64: Int]>([:])
    /// Per item: its ctime right after the daemon's last change, until when to keep it, and
    /// the queue position from which on an echo may match (0: any; `.max`: none yet).
    private let items = Mutex<[UInt64: ItemRecord]>([:])
    /// A state the daemon left, and from which queue positions on its echoes may match: one
    /// mark for IN_ATTRIB (a setattr's echo comes at once), one for IN_CLOSE_WRITE (an open
    /// handle's comes at its close; an outside writer closing before must not match).
    struct ItemRecord {
        var seconds: Int
        var nanoseconds: Int
        var deadline: UInt64
        var attributesAfter: UInt64
        var closeAfter: UInt64
        /// Set by a handle's close (`closingItem`): the first IN_CLOSE_WRITE that matches is
        /// that close's echo, and closes queued after it are a writer's outside the mount
        /// (`closeUntil`).
        var closeOnce = false
        /// With `closeOnce`, just past the echo that met the record (`.max` until one did).
        var closeUntil: UInt64 = .max
        /// For the change that set `attributesAfter` (a setattr, an xattr change): a queue
        /// position its IN_ATTRIB was queued before (0: none known). Until the watcher has
        /// handled that far, a write made on this state keeps the mark (`recordWrite`).
        var echoBy: UInt64 = 0
        func describes(_ st: stat) -> Bool { seconds == st.st_ctim.tv_sec && nanoseconds == st.st_ctim.tv_nsec }
        func isNewer(than st: stat) -> Bool { (seconds, nanoseconds) > (st.st_ctim.tv_sec, st.st_ctim.tv_nsec) }
    }
    /// Per item the daemon created (a new inode, under a name the kernel asked for): the
    /// queue position just before the creation, and until when to keep it. An item event
    /// (IN_CLOSE_WRITE, IN_ATTRIB) queued before that position names the item's entry but
    /// was about whatever held the name then: the watcher reads the state by name, when it
    /// gets to the event, and would take the new item's for an outside change (`madeAfter`).
    private let births = Mutex(MarkTable<UInt64, (after: UInt64, deadline: UInt64)>())
    /// Per name the daemon moved an item away from (a rename through the mount, or an unlink
    /// of a file with other names): what it led to until then (nil: not known), the exact
    /// queue position just before the change, and until when to keep it. The watcher reads
    /// an item event's state by name when it gets to the event; an event queued before the
    /// change named the item under that name, which by then is gone (an edit in the store
    /// followed at once by a rename through the mount was lost for good: found by a
    /// coherence fuzzer) or leads elsewhere (`nameAtEvent`). In order of the changes.
    private let departures = Mutex(MarkTable<EntryKey, [(inode: UInt64?, before: UInt64?, deadline: UInt64)]>())
    /// Where the watcher's inotify queue stands (the watcher reads the queue through it).
    let cursor = QueueCursor()
    /// Off until a watcher runs: without one, recording would only grow the tables.
    let enabled = Atomic<Bool>(false)

    init(checksOwnState: Bool = true) { self.checksOwnState = checksOwnState }

    /// Whether the daemon's own writes and `setattr`s check that the file is in the state
    /// its last change left (`beforeWrite`, `Item.pagesShow`). Not under `-o writeback`:
    /// there the kernel's writes come late, in parallel and without their writer, a check
    /// that read another one's write before its record would take it for someone else's,
    /// and pages in doubt leave every later handle uncached until the kernel lets go of the
    /// inode (the benchmark's SQLite point selects fell to 0.17× the anchor).
    let checksOwnState: Bool


    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    // MARK: - Recording (request handlers)

    /// An entry `name` of `directory` is about to appear, or (`removing`) vanish or be
    /// replaced. `after`: an exact queue position taken before the change (nil: none), which
    /// its echo comes after (`EntryExpectation.after`).
    func expectEntry(_ directory: UInt64, _ name: UnsafePointer<CChar>, removing: Bool = false, after mark: UInt64? = nil) {
        guard enabled.load(ordering: .relaxed), let component = FilePath.Component(platformString: name) else { return }
        let now = Self.now(), deadline = now + Self.lifetime
        entries.withLock { table in
            Self.prune(&table) { $0.deadline }
            let key = EntryKey(directory: directory, name: component)
            var e = table[key] ?? EntryExpectation(after: mark ?? 0)
            e.after = min(e.after, mark ?? 0)
            if e.count == 0 { e.firstStartedAt = now }
            e.lastStartedAt = now
            e.count += 1
            e.removals += removing ? 1 : 0
            e.inFlight += 1
            e.deadline = deadline
            table[key] = e
        }
    }

    /// The change expected by `expectEntry` returned: its echo is queued by now. `bounded`:
    /// the change may have queued none, and later events are bounded by the queue position
    /// now (one `ioctl`, 0.3–0.5 µs with the queue a storm leaves, which every create and
    /// unlink would otherwise pay for nothing).
    func entryChanged(_ directory: UInt64, _ name: UnsafePointer<CChar>, bounded: Bool) {
        guard enabled.load(ordering: .relaxed), let component = FilePath.Component(platformString: name) else { return }
        let position = bounded ? queuePosition() : 0  // may overshoot by a buffer while a read is under way: only lenient
        entries.withLock { table in
            let key = EntryKey(directory: directory, name: component)
            guard var e = table[key] else { return }
            e.inFlight = max(e.inFlight - 1, 0)
            if bounded {
                e.uncertain = min(e.uncertain + 1, e.count)
                e.until = max(e.until, position)
            }
            table[key] = e
        }
    }

    /// Where the watcher's queue stands now (0 without a watcher: any echo may match). Read
    /// before a change the daemon makes, as that change's mark.
    func queuePosition() -> UInt64 {
        guard enabled.load(ordering: .acquiring) else { return 0 }
        return cursor.position()
    }

    /// The daemon has just changed, opened or written the item; `st` is what `fstat` says
    /// now; `after`, the mark of both kinds of echo (see the type's doc: `.max` until a
    /// close marks it), or `closeAfter` apart. A record of the state the live one describes
    /// keeps its earlier marks: nothing changed the item in between, so an echo still unread
    /// is still the daemon's. `lifetime`: for tests.
    /// `echoBy`: see `ItemRecord`. `before`: a write's (`recordWrite`).
    func recordItem(_ inode: UInt64, _ st: stat, after: UInt64, closeAfter: UInt64? = nil, echoBy: UInt64 = 0,
                    before: stat? = nil, lifetime: UInt64 = OwnChanges.lifetime) {
        guard enabled.load(ordering: .relaxed) else { return }
        let deadline = Self.now() + lifetime
        items.withLock { table in
            Self.prune(&table) { $0.deadline }
            var record = ItemRecord(seconds: st.st_ctim.tv_sec, nanoseconds: st.st_ctim.tv_nsec, deadline: deadline,
                                    attributesAfter: after, closeAfter: closeAfter ?? after, echoBy: echoBy)
            if let e = table[inode], e.describes(st) {
                record.attributesAfter = min(record.attributesAfter, e.attributesAfter)
                record.closeAfter = min(record.closeAfter, e.closeAfter)
                record.echoBy = max(record.echoBy, e.echoBy)
            } else if let before, let e = table[inode], e.describes(before), Self.onlyWritten(from: before, to: st) {
                // A write made on the state the daemon's attribute change left, which left
                // nothing but a write's marks: that change's IN_ATTRIB, not handled yet, is
                // still the daemon's own.
                record.attributesAfter = min(record.attributesAfter, e.attributesAfter)
                record.echoBy = e.echoBy
            }
            table[inode] = record
        }
    }

    /// Whether `after` differs from `before` only as a write makes it differ: the same
    /// owner, group, mode (but set-ID bits a write cleared) and link count, and ctime equal
    /// to mtime (a write sets both to one instant; a `chmod`, `chown` or `utimens` after it
    /// moves the ctime alone, and one before it changes what is compared). An attribute
    /// change made outside while the daemon wrote so stays outside.
    static func onlyWritten(from before: stat, to after: stat) -> Bool {
        let setID = mode_t(S_ISUID | S_ISGID)
        return after.st_uid == before.st_uid && after.st_gid == before.st_gid && after.st_nlink == before.st_nlink
            && after.st_mode & ~setID == before.st_mode & ~setID
            && after.st_mode & setID & ~before.st_mode == 0
            && after.st_ctim.tv_sec == after.st_mtim.tv_sec && after.st_ctim.tv_nsec == after.st_mtim.tv_nsec
    }

    /// Before a write through a handle of the item (`fd`). `forRecord`: the item's state
    /// now, if the daemon's last change of it was an attribute change whose IN_ATTRIB the
    /// watcher may not have handled yet; nil otherwise (the usual case).
    ///
    /// Without it the echo of a setattr followed by a write — SQLite's `fchown` of each new
    /// journal, the times the kernel writes back under `-o writeback` — met the state the
    /// write left, which no attribute echo matches, and was taken for an outside change:
    /// the kernel dropped the file's attributes (and, under writeback, its entry) at every
    /// commit.
    ///
    /// `continues`: whether the item is in the state the daemon's last change of it left
    /// (an `fstat` every time): a change in between was someone else's, which no event may
    /// tell of (a `truncate(2)` by path; a writer's close that inotify merges with the
    /// daemon's), and which the daemon's writes would then take for their own
    /// (`Item.pagesShow`). Without `checksOwnState` the file is read only when the record
    /// needs it, and `continues` is true.
    func beforeWrite(_ inode: UInt64, descriptor fd: CInt) -> (forRecord: stat?, continues: Bool) {
        guard enabled.load(ordering: .relaxed) else { return (nil, true) }
        var st = checksOwnState ? try? Syscall.fstat(fd) : nil
        let handled = cursor.handledBytes.load(ordering: .acquiring)
        let (pending, continues) = items.withLock { table -> (Bool, Bool) in
            let e = table[inode]
            return (e.map { $0.echoBy > handled } ?? false, st.map { e?.describes($0) ?? false } ?? true)
        }
        if pending && st == nil { st = try? Syscall.fstat(fd) }
        return (pending ? st : nil, continues)
    }

    /// Whether `st` is the state the daemon's last change of the item left.
    func continuesOwnState(_ inode: UInt64, _ st: stat) -> Bool {
        items.withLock { $0[inode]?.describes(st) ?? false }
    }

    /// After a write through a handle (`fd`): records the state it left, which the handle's
    /// close echoes; `before`: `beforeWrite`'s `forRecord`.
    func recordWrite(_ inode: UInt64, descriptor fd: CInt, before: stat?) {
        guard enabled.load(ordering: .relaxed), let st = try? Syscall.fstat(fd) else { return }
        recordItem(inode, st, after: .max, before: before)
    }

    /// `recordItem` after `fstat` of a descriptor of the item (best effort: without the
    /// record the echo is merely reported as outside, one needless invalidation).
    func recordItem(_ inode: UInt64, descriptor fd: CInt, after: UInt64) {
        guard enabled.load(ordering: .relaxed), let st = try? Syscall.fstat(fd) else { return }
        recordItem(inode, st, after: after)
    }

    /// A handle that wrote is closing; `fd` is its descriptor. Its close echoes as
    /// IN_CLOSE_WRITE, which is the daemon's own only if the item is still in the state the
    /// daemon's last change left (recorded at the handle's open and after each of its
    /// writes): the record's life is renewed then, and left alone otherwise, so that an edit
    /// made in the store after the last write — before the kernel's RELEASE, which comes after
    /// the caller's close(2) returned — is seen as the outside change it is. Recording the
    /// state here instead took that edit for the daemon's own.
    /// Called before the descriptor's `close(2)`: the mark is taken after the `fstat`, so
    /// that only the close's own echo, or one that changes nothing, comes after it.
    /// Returns the state read when it is the daemon's own.
    @discardableResult
    func closingItem(_ inode: UInt64, descriptor fd: CInt) -> stat? {
        guard enabled.load(ordering: .relaxed), let st = try? Syscall.fstat(fd) else { return nil }
        let mark = queuePosition()
        let deadline = Self.now() + Self.lifetime
        return items.withLock { table in
            guard var e = table[inode], e.describes(st) else { return nil }
            e.deadline = deadline
            e.closeAfter = min(e.closeAfter, mark)
            e.closeOnce = true
            e.closeUntil = .max
            table[inode] = e
            return st
        }
    }

    /// A descriptor of the daemon's that wrote nothing is closing (`fd`, before its
    /// `close(2)`); `after`: the mark of a change it made when opened (a truncation), else
    /// `.max`. Its IN_CLOSE_WRITE is the daemon's own, marked with the position now.
    func closingUnwritten(_ inode: UInt64, descriptor fd: CInt, after: UInt64) {
        guard enabled.load(ordering: .relaxed), let st = try? Syscall.fstat(fd) else { return }
        recordItem(inode, st, after: after, closeAfter: queuePosition())
    }

    /// The marks of a creation the daemon is about to make, from one reading of the queue:
    /// `queuePosition()`'s for its records, and one for `made`, never past the queue's
    /// position (nil when no exact one was to be had: then no birth is recorded).
    func creationMarks() -> (mark: UInt64, birth: UInt64?) {
        guard enabled.load(ordering: .acquiring) else { return (0, nil) }
        if let exact = cursor.exactPosition() { return (exact, exact) }
        return (cursor.position(), nil)
    }

    /// The daemon created the item `inode` (a new inode: no other name led to it before)
    /// after the queue position `mark` (`creationMarks`).
    func made(_ inode: UInt64, after mark: UInt64?) {
        guard let mark, enabled.load(ordering: .relaxed) else { return }
        let now = Self.now()
        let handled = cursor.handledBytes.load(ordering: .acquiring)
        births.withLock { table in
            table.set(inode, (mark, now + Self.lifetime)) { $0.deadline >= now && $0.after > handled }
        }
    }

    /// Whether the item in state `st` was created by the daemon after the event queued at
    /// `position`: the event was about an earlier item under the same name (SQLite's
    /// journal, made and deleted at every commit), and tells nothing of this one. Sound
    /// because the item is a new inode (no name led to it before its creation) and the mark
    /// is never past the queue's position at the creation; an inode number freed and
    /// reused since was freed after the mark too. Past `lifetime` the event is judged by
    /// state as before (at worst a needless invalidation).
    func madeAfter(_ st: stat, queuedAt position: UInt64) -> Bool {
        let now = Self.now()
        return births.withLock { table in
            guard let b = table[UInt64(st.st_ino)], b.deadline >= now else { return false }
            return position < b.after
        }
    }

    /// A mark for `departed`: the exact queue position now (never past it, so that an event
    /// queued after the rename is never taken for the moved item's), or nil when a read of
    /// the queue was under way at each look.
    func departureMark() -> UInt64? {
        guard enabled.load(ordering: .acquiring) else { return nil }
        return cursor.exactPosition()
    }

    /// Whether an event queued before `mark` may still be unhandled: a departure then needs
    /// recording. Every event handled already is the usual case, and every case in a store
    /// nobody edits behind the mount.
    func mayBeUnhandled(before mark: UInt64?) -> Bool {
        guard enabled.load(ordering: .relaxed) else { return false }
        guard let mark else { return true }
        return cursor.handledBytes.load(ordering: .acquiring) < mark
    }

    /// `name` of `directory` stopped leading to `inode` (nil: to what, the daemon does not
    /// know) by a rename or unlink the daemon made after the queue position `mark`
    /// (`departureMark`; nil: not known).
    func departed(_ directory: UInt64, _ name: UnsafePointer<CChar>, inode: UInt64?, after mark: UInt64?) {
        guard mayBeUnhandled(before: mark), let component = FilePath.Component(platformString: name) else { return }
        let now = Self.now()
        let handled = cursor.handledBytes.load(ordering: .acquiring)
        departures.withLock { table in
            let key = EntryKey(directory: directory, name: component)
            var list = (table[key] ?? []).filter { $0.deadline >= now }
            list.append((inode, mark, now + Self.lifetime))
            table.set(key, list) { list in list.contains { $0.deadline >= now && ($0.before ?? .max) > handled } }
        }
    }

    /// What an item event of `name` in `directory`, queued at `position`, was about.
    enum NameAtEvent: Equatable {
        /// What the name leads to now: read it by name.
        case current
        /// The daemon has renamed or unlinked the name since: it led to this item (nil: unknown).
        case departed(UInt64?)
        /// The daemon renamed or unlinked the name away from this item within the second, at a queue
        /// position not known: read it by name, and if the name leads nowhere, the event
        /// was most likely about this item (else about one made and removed since).
        case departedIfGone(UInt64)
    }

    func nameAtEvent(_ directory: UInt64, _ name: FilePath.Component, queuedAt position: UInt64) -> NameAtEvent {
        let now = Self.now()
        return departures.withLock { table in
            guard let list = table[EntryKey(directory: directory, name: name)] else { return .current }
            for d in list where d.deadline >= now {
                guard let before = d.before else {
                    if let inode = d.inode { return .departedIfGone(inode) }
                    continue
                }
                if position < before { return .departed(d.inode) }
            }
            return .current
        }
    }

    /// The daemon starts (`true`) or ends (`false`) a change of the item: see `busy`.
    /// `changing` of an item of the volume, kept on the item too (`Item.ownChangesUnderWay`,
    /// which an open reads without this table's lock).
    func changing(_ item: Item, _ starts: Bool) {
        if starts { item.ownChangesUnderWay.add(1, ordering: .acquiring) } else { item.ownChangesUnderWay.subtract(1, ordering: .releasing) }
        changing(item.inode, starts)
    }

    func changing(_ inode: UInt64, _ starts: Bool) {
        busy.withLock { table in
            let n = (table[inode] ?? 0) + (starts ? 1 : -1)
            table[inode] = n > 0 ? n : nil
        }
    }

    /// `changingItem` of an item of the volume. A change of a regular file's content made
    /// from the content the kernel's pages show leaves pages that show the new one
    /// (`Item.pagesShow`: the kernel truncates its own, and times change no page); one made
    /// from other content that left the content the pages show by its stamp (under
    /// writeback the kernel sets back an mtime a writer in the store moved) leaves them in
    /// doubt.
    func changingItem(_ item: Item, _ body: () throws(Errno) -> stat) throws(Errno) -> stat {
        guard item.isRegularFile else { return try changingItem(item.inode, descriptor: item.fd, body) }
        item.ownChangesUnderWay.add(1, ordering: .acquiring)
        defer { item.ownChangesUnderWay.subtract(1, ordering: .releasing) }
        return try changingItem(item.inode, descriptor: item.fd, body) { before, after, continues in
            // Beside a handle of the daemon's that writes, the pages show what its writes
            // left: in doubt if the file was not in that state.
            if item.ownChangesUnderWay.load(ordering: .acquiring) > 1 {
                if !continues && self.checksOwnState { item.pagesShow.store(ContentStamp.doubtful, ordering: .relaxed) }
                return
            }
            let (from, to) = (ContentStamp.of(before), ContentStamp.of(after))
            let shown = item.pagesShow.load(ordering: .relaxed)
            if shown == from || (shown == to && from != to) {
                item.pagesShow.store(shown == from ? to : ContentStamp.doubtful, ordering: .relaxed)
            }
        }
    }

    /// Runs one change of the item (whose descriptor is `fd`) by the daemon, recording its
    /// state after (`st`). Its IN_ATTRIB is marked with the queue's position before the
    /// change — or with the mark of the daemon's previous change, if the item was still in
    /// the state that one left (inotify may merge the two echoes into the first). A close
    /// still to come keeps the previous change's mark for IN_CLOSE_WRITE (none: `.max`).
    /// `changed`: told the states before and after, and whether the state before was the
    /// one the daemon's last change left, while the change still counts as under way
    /// (`isChanging`).
    func changingItem(_ inode: UInt64, descriptor fd: CInt, _ body: () throws(Errno) -> stat,
                              changed: ((stat, stat, Bool) -> Void)? = nil) throws(Errno) -> stat {
        changing(inode, true)
        defer { changing(inode, false) }
        guard enabled.load(ordering: .acquiring) else { return try body() }
        var attributesMark = queuePosition()
        var closeMark = UInt64.max
        var continues = false
        let before = try? Syscall.fstat(fd)
        if let before {
            items.withLock { table in
                if let e = table[inode], e.describes(before) {
                    attributesMark = min(attributesMark, e.attributesAfter)
                    closeMark = e.closeAfter
                    continues = true
                }
            }
        }
        let st = try body()
        // The echo is queued by now, before this position; none known (0) without an exact
        // one (`position` may overshoot by a buffer, which would keep the mark for long).
        recordItem(inode, st, after: attributesMark, closeAfter: closeMark, echoBy: cursor.exactPosition() ?? 0)
        if let changed, let before { changed(before, st, continues) }
        return st
    }

    /// Whether the daemon is changing the item right now.
    func isChanging(_ inode: UInt64) -> Bool {
        busy.withLock { $0[inode] != nil }
    }

    /// A change expected by `expectEntry` failed: it queues no echo. Returns the name if an
    /// event of it may have been taken for that echo while the change was in flight (the
    /// expectation was spent, or fewer echoes are expected than changes are in flight): an
    /// outside change, made just then, that nobody was told of.
    @discardableResult
    func withdrawEntry(_ directory: UInt64, _ name: UnsafePointer<CChar>) -> FilePath.Component? {
        guard enabled.load(ordering: .relaxed), let component = FilePath.Component(platformString: name) else { return nil }
        return entries.withLock { table in
            let key = EntryKey(directory: directory, name: component)
            guard var e = table[key] else { return component }
            let taken = e.count < e.inFlight
            e.inFlight = max(e.inFlight - 1, 0)
            table[key] = Self.takingOne(e)
            return taken ? component : nil
        }
    }

    /// Told of each name an outside change may have been taken for a failed change's echo
    /// (`withdrawEntry`); set by the volume, which tells the kernel.
    let mistakenEcho = Mutex<MistakenEcho?>(nil)
    /// In a box: a closure read out of a `Mutex` by `withLock` is written back wrapped in
    /// reabstraction thunks, one more layer per read.
    final class MistakenEcho: Sendable {
        let tell: @Sendable (_ directory: UInt64, _ name: FilePath.Component) -> Void
        init(_ tell: @escaping @Sendable (_ directory: UInt64, _ name: FilePath.Component) -> Void) { self.tell = tell }
    }

    /// `e` with one expected echo taken; nil when none is left.
    private static func takingOne(_ e: EntryExpectation) -> EntryExpectation? {
        guard e.count > 1 else { return nil }
        var rest = e
        rest.count -= 1
        rest.firstStartedAt = rest.lastStartedAt  // the next one's time is not kept
        rest.removals = min(rest.removals, rest.count)
        rest.uncertain = min(rest.uncertain, rest.count)  // a certain echo is taken first
        return rest
    }

    /// Runs a change of the entry `name` of `directory`, expecting its echo; a failed change
    /// makes no echo, so its expectation is withdrawn (it would hide the next outside change).
    /// `echoUncertain`: the change may succeed and queue no echo (`entryChanged`). `after`:
    /// see `expectEntry`.
    func expectingEntry<R, E: Error>(_ directory: UInt64, _ name: UnsafePointer<CChar>, removing: Bool = false,
                                     echoUncertain: Bool = false, after mark: UInt64? = nil,
                                     _ body: () throws(E) -> R) throws(E) -> R {
        expectEntry(directory, name, removing: removing, after: mark)
        do {
            let result = try body()
            entryChanged(directory, name, bounded: echoUncertain)
            return result
        } catch {
            if let mistaken = withdrawEntry(directory, name), let echo = mistakenEcho.withLock({ $0 }) { echo.tell(directory, mistaken) }
            throw error
        }
    }

    // MARK: - Matching (the watcher)

    /// Whether `entryEcho` finds the event the echo of the daemon's own change (consuming it).
    func isOwnEntry(_ directory: UInt64, _ name: FilePath.Component, queuedAt position: UInt64 = 0,
                    watchedSince: UInt64 = 0) -> Bool {
        entryEcho(directory, name, queuedAt: position, watchedSince: watchedSince) == .own
    }

    /// What an entry event is: the echo of the daemon's own change, an outside change, or
    /// one that may be either, because an expected change it may echo was forgotten at the
    /// watch's beginning (`forgetStarted`). The watcher tells the kernel of the last by
    /// expiring the entry, as of what a new directory lists: an invalidation unhashes an
    /// entry even in use, and a process working in a subdirectory the mount had just made
    /// lost its working directory (`working-directory-in-new-directory`).
    enum EntryEcho { case own, outside, uncertain }

    /// What the entry event queued at `position` is (`EntryEcho`); an echo is consumed.
    /// Expectations it is queued after every echo of are dropped: their echoes came before
    /// or never will. `watchedSince`: when the directory's watch began (`now()`, read once
    /// `inotify_add_watch` returned). Changes begun before it may have queued no echo on
    /// that watch, and are forgotten (`forgetStarted`): a directory made through the mount
    /// is watched once the watcher reads its creation, and what the mount made in it before
    /// then left expectations no echo meets, which took the store's next change of the name
    /// for the daemon's own, and the kernel kept the old file under it for good (a loop
    /// after a coherence fuzzer's s29a-def-2901: 1 round in 5-10). Also when a later change
    /// of the name, made once the watch began, joined them: its echo took one, and the one
    /// left took the store's next change (a new directory's file made and removed through
    /// the mount, then made in the store: the kernel kept its negative entry, s29b-def-2913).
    func entryEcho(_ directory: UInt64, _ name: FilePath.Component, queuedAt position: UInt64 = 0,
                   watchedSince: UInt64 = 0) -> EntryEcho {
        let now = Self.now()
        return entries.withLock { table -> EntryEcho in
            let key = EntryKey(directory: directory, name: name)
            guard var e = table[key] else { return .outside }
            let expected = e.count
            e.forgetStarted(before: watchedSince)
            let forgot = e.count < expected
            if e.count <= 0 {
                table[key] = nil
                return .uncertain
            }
            if position < e.after { table[key] = e; return forgot ? .uncertain : .outside }  // before every expected change: theirs are to come
            e.spendUncertain(before: position)
            guard e.admits(position, now: now) else {
                table[key] = e.inFlight == 0 || e.count == 0 ? nil : e
                return forgot ? .uncertain : .outside
            }
            table[key] = Self.takingOne(e)
            return .own
        }
    }

    /// Whether any entry change is expected (a walk of the store skips `metBeforeWatch`
    /// when none is).
    var expectsEntries: Bool { entries.withLock { !$0.isEmpty } }

    /// `name` was found in `directory` when its watch began (`watchedSince`, as for
    /// `entryEcho`): the expected changes of it begun before then may have queued no echo on
    /// the watch, and are forgotten (`forgetStarted`). Those begun after it echo on it, and
    /// are kept for their echoes: taken here, the echo of a subdirectory made between the
    /// watch's start and its listing (`mkdir -p a/b/c; cd a/b/c`) was an outside change, and
    /// its invalidation unhashed the process's working directory (getcwd: ENOENT; CI's
    /// `working-directory-in-new-directory`, 1 of 300 rounds once). What is left with no
    /// change expected stays until its deadline, so that an echo of one begun just before
    /// the watch, still in its system call then, reads as uncertain (an expiry, which
    /// leaves an entry in use hashed), as in `entryEcho`.
    func metBeforeWatch(_ directory: UInt64, _ name: FilePath.Component, watchedSince: UInt64) {
        entries.withLock { table in
            let key = EntryKey(directory: directory, name: name)
            guard var e = table[key] else { return }
            e.forgetStarted(before: watchedSince)
            table[key] = e
        }
    }

    /// Whether a removal or replacement of the entry `name` of `directory` is expected,
    /// without consuming it: an unlink echoes as IN_ATTRIB (link count) before its IN_DELETE.
    /// Only removals: a creation whose IN_CREATE never came (made just before its
    /// directory's watch began) would otherwise hide every IN_ATTRIB of the new file, an
    /// outside `chmod` among them, for the expectation's lifetime.
    func expectsRemoval(_ directory: UInt64, _ name: FilePath.Component, queuedAt position: UInt64 = 0,
                        watchedSince: UInt64 = 0) -> Bool {
        let now = Self.now()
        return entries.withLock { table in
            guard let e = table[EntryKey(directory: directory, name: name)] else { return false }
            return e.removals > 0 && e.admits(position, now: now) && e.lastStartedAt >= watchedSince
        }
    }

    /// Whether the item's current state `st` (the watcher's `fstatat` after an IN_CLOSE_WRITE
    /// or IN_ATTRIB queued at `position`) is the one the daemon's own last change left.
    /// `closing`: the event is an IN_CLOSE_WRITE (else an IN_ATTRIB).
    func isOwnItemState(_ st: stat, queuedAt position: UInt64, closing: Bool = false) -> Bool {
        let now = Self.now()
        return items.withLock { table in
            guard let e = table[UInt64(st.st_ino)] else { return false }
            if e.describes(st) && e.deadline >= now {
                // An echo queued before the mark is someone else's.
                guard closing else { return position >= e.attributesAfter }
                guard position >= e.closeAfter && position < e.closeUntil else { return false }
                // A handle's close echoes once: a later close in this state is a writer's
                // outside the mount, which may have written before the daemon opened the
                // file (so that the state recorded then held its write). Two of the daemon's
                // handles closing in one state: the second echo counts as outside (one
                // needless invalidation).
                if e.closeOnce && e.closeUntil == .max { table[UInt64(st.st_ino)]?.closeUntil = position + 1 }
                return true
            }
            // Moved on (someone else changed it since), or expired: the record goes. Not for
            // a state older than the record: the watcher read it before a change the daemon
            // was making landed, whose echo is still to come (one needless invalidation).
            if !e.isNewer(than: st) { table[UInt64(st.st_ino)] = nil }
            return false
        }
    }

    /// Keeps a table from growing without bound: past 50,000 entries, expired ones go.
    private static func prune<K, V>(_ table: inout [K: V], deadline: (V) -> UInt64) {
        guard table.count > 50_000 else { return }
        let now = Self.now()
        table = table.filter { deadline($0.value) >= now }
    }

    /// Forgets every expectation (after a queue overflow everything is rescanned anyway).
    func reset() {
        entries.withLock { $0.removeAll() }
        items.withLock { $0.removeAll() }
        births.withLock { $0 = MarkTable() }
        departures.withLock { $0 = MarkTable() }
    }
}

extension Volume {
    /// Runs a change the daemon makes to the entry `name` of the directory `parent` outside
    /// a kernel request (a CLI command), expecting its echo from the store watcher.
    public func expectingOwnEntry(parent: UInt64, _ name: UnsafePointer<CChar>, _ body: () throws -> Void) throws {
        try ownChanges.expectingEntry(parent, name, body)
    }
}
