import SystemPackage

/// What the bridge needs of a store watcher: whether it sees every change (long cache
/// timeouts), and catching up with the changes made before a request (DESIGN.md 27).
/// `StoreWatcher` (inotify, the default) and `FanotifyWatcher` (`-o watcher=fanotify`).
public protocol StoreWatching: AnyObject, Sendable {
    /// False while some change could go unseen: the mount uses short cache timeouts.
    var isComplete: Bool { get }
    func start()
    func stop()
    func isCaughtUp(with inode: UInt64) -> Bool
    func whenCaughtUp(with inode: UInt64, _ then: @escaping @Sendable () -> Void)
    func readQueue()
    /// `inotify` or `fanotify` (`containerfs status`).
    var kind: String { get }
}

extension StoreWatcher: StoreWatching {
    public var isComplete: Bool { complete.load(ordering: .acquiring) }
    public var kind: String { "inotify" }
}
