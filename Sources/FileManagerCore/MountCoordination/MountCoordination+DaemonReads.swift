import SystemPackage

extension MountCoordination {
    /// Runs `body`, a reading of the item at `path` (relative to the mount) and of everything
    /// inside it that the daemon makes for a CLI command (a snapshot's publish), as a
    /// coordinated subtree read by `caller`'s process: presenters of the item and of every
    /// item inside it are asked to save first, and writers of any of them wait while `body`
    /// runs (and `body` waits for writers already running), up to the content deadline (then
    /// EBUSY). A caller inside a `coordinate` session is not blocked by its own claims.
    ///
    /// The claim is `.explicit`: `body` may take further claims (the hooks' write of the
    /// new `snapshots/` entry), so deadlock detection must see this one held meanwhile.
    public func coordinatingSubtreeRead<R>(_ path: FilePath, caller: Caller, _ body: () throws -> R) throws -> R {
        try coordinating(path, caller: caller, lifetime: .explicit, body) { target, relative in
            Claim(target: target, readingSubtree: [], path: relative)
        }
    }
}
