import SystemPackage

/// Item events (IN_CLOSE_WRITE, IN_ATTRIB) whose name led nowhere when the watcher read it:
/// renamed in the store before the watcher got to the event (`printf >f; mv f g`, an
/// editor's save). The watcher reads an item's state by the event's name; the rename's
/// IN_MOVED_FROM of that name, queued after, carries the event to its cookie, and the
/// IN_MOVED_TO with that cookie names the item again. Without it the edit was lost: under
/// `-o writeback` the kernel kept the file's old size and pages at the new name for good
/// (a coherence fuzzer, every replay).
///
/// Pure state, used by the watcher with its queue lock held. A name removed or made again
/// drops what waited for it; the whole is bounded (`limit`), since a name that was
/// unlinked, or moved out of the watched tree, never brings its IN_MOVED_TO.
struct MovedBeforeRead {
    struct Key: Hashable {
        let directory: UInt64
        let name: FilePath.Component
    }

    private var byName: [Key: UInt32] = [:]
    private var byCookie: [UInt32: UInt32] = [:]
    static let limit = 256

    /// An item event `mask` of `name` in `directory` found the name gone.
    mutating func lost(_ mask: UInt32, _ directory: UInt64, _ name: FilePath.Component) {
        if byName.count >= Self.limit { byName.removeAll() }
        byName[Key(directory: directory, name: name), default: 0] |= mask
    }

    /// The name moved away (IN_MOVED_FROM, `cookie`): what was lost under it follows.
    mutating func movedAway(_ directory: UInt64, _ name: FilePath.Component, cookie: UInt32) {
        guard let mask = byName.removeValue(forKey: Key(directory: directory, name: name)) else { return }
        if byCookie.count >= Self.limit { byCookie.removeAll() }
        byCookie[cookie, default: 0] |= mask
    }

    /// The name arrived (IN_MOVED_TO, `cookie`): the item events to handle under it, if any.
    mutating func arrived(cookie: UInt32) -> UInt32? {
        byCookie.isEmpty ? nil : byCookie.removeValue(forKey: cookie)
    }

    /// The name was removed, made anew or moved onto (IN_DELETE, IN_CREATE, IN_MOVED_TO):
    /// nothing lost under it can be found any more.
    mutating func replaced(_ directory: UInt64, _ name: FilePath.Component) {
        if !byName.isEmpty { byName[Key(directory: directory, name: name)] = nil }
    }

    mutating func reset() {
        byName.removeAll()
        byCookie.removeAll()
    }
}
