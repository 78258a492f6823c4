import Dispatch
import Synchronization
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
        let relative = VolumeClaimResolver.relative(path)
        let resolved = center.resolver.target(for: relative, resolvingSymlink: false)
        let claim = Claim(target: resolved.target, readingSubtree: [], path: relative)
        beginDemand()
        defer { endDemand() }
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<Result<CoordinatedAccess, CoordinationError>?>(nil)
        center.beginAccess([claim], purpose: purposes.purpose(ofThread: caller.pid), accessorUID: caller.uid,
                           lifetime: .explicit, deadline: ContinuousClock.now + contentDeadline) { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        switch outcome.withLock({ $0! }) {
        case .failure(let error):
            throw FileManagerError(error.errno, path: relative.string)
        case .success(let access):
            defer { access.end() }
            return try body()
        }
    }
}
