import Dispatch
import Synchronization
import SystemPackage

extension MountCoordination {
    /// Runs `body`, a change the daemon makes to the store for a CLI command (a delivery, a
    /// purge), as a coordinated write on `path` (relative to the mount) by `caller`'s
    /// process: presenters are asked first (to save, or to accommodate a deletion) and
    /// conflicting claims waited for, up to the content deadline (then EBUSY). A caller
    /// inside a `coordinate` session is not blocked by its own claim.
    public func coordinatingWrite<R>(_ path: FilePath, options: CoordinatedWritingOptions, caller: Caller,
                                     _ body: () throws -> R) throws -> R {
        try coordinating(path, caller: caller, body) { target, relative in Claim(target: target, writing: options, path: relative) }
    }

    /// Runs `body` holding the claim `make` builds for the item at `path` (relative to the
    /// mount), taken for `caller`'s process up to the content deadline (then EBUSY, with the
    /// path). `lifetime` `.explicit`: `body` may take further claims meanwhile.
    func coordinating<R>(_ path: FilePath, caller: Caller, lifetime: ClaimLifetime = .callback, _ body: () throws -> R,
                         claim make: (ClaimTarget, FilePath) -> Claim) throws -> R {
        let relative = VolumeClaimResolver.relative(path)
        let resolved = center.resolver.target(for: relative, resolvingSymlink: false)
        let claim = make(resolved.target, relative)
        beginDemand()
        defer { endDemand() }
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<Result<CoordinatedAccess, CoordinationError>?>(nil)
        center.beginAccess([claim], purpose: purposes.purpose(ofThread: caller.pid), accessorUID: caller.uid,
                           lifetime: lifetime, deadline: ContinuousClock.now + contentDeadline) { result in
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
