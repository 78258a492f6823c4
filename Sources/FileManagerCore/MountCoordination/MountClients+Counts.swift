// MARK: - Counts, for the daemon's `status`

extension MountClients {
    /// Presenters registered over the control socket, every user's.
    public var presenterCount: Int { presenters.withLock { $0.count } }
    /// Explicit claims held over the control socket, every user's.
    public var claimCount: Int { claims.withLock { $0.count } }
}
