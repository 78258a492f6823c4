import SystemPackage

/// What the bridge needs of a store watcher: whether it sees every change (long cache
/// timeouts), and catching up with the changes made before a request (DESIGN.md 27).
/// `FanotifyWatcher` is the one there is; where it cannot run the mount has none, and the
/// bridge uses short cache timeouts.
public protocol StoreWatching: AnyObject, Sendable {
    /// False while some change could go unseen: the mount uses short cache timeouts.
    var isComplete: Bool { get }
    func start()
    func stop()
    func isCaughtUp(with inode: UInt64) -> Bool
    func whenCaughtUp(with inode: UInt64, _ then: @escaping @Sendable () -> Void)
    func readQueue()
    /// What watches the store, for `containerfs status` (`fanotify`).
    var kind: String { get }
    /// What it is and how it watches, for the daemon's log.
    var summary: String { get }
}

/// Hears of changes made to the store outside the mount, by mount-relative path.
public protocol StoreChangeListener: Sendable {
    /// Whether anyone would hear of it: computing paths costs a readlink per event.
    var wantsStoreChanges: Bool { get }
    func storeChanged(_ event: PresenterEvent)
}
