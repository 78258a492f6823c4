import Foundation
import Glibc
import Synchronization
import SystemPackage

// MARK: - What control-socket clients do: present items, hold explicit claims
//
// Both switch the mount into coordinated mode for their lifetime (`beginDemand`), and both
// end when the client's connection closes, whatever the client does.

/// Per-daemon bookkeeping of remote presenters and explicit claims.
public final class MountClients: Sendable {
    let presenters = Mutex<[Int: RemotePresenter]>([:])
    let claims = Mutex<[Int: (CoordinatedAccess, pid: Int32)]>([:])
    let nextID = Atomic<Int>(1)
    public init() {}
}

extension MountCoordination {
    // MARK: Presenters

    /// Registers a presenter of `path` (relative to the mount) for the connection's process.
    /// A user may present only what they may read (root anything); a path that does not
    /// exist yet is allowed (it is bound when created).
    public func registerPresenter(path: FilePath, connection: ControlConnection, clients: MountClients) throws(FileManagerError) -> Int {
        let relative = VolumeClaimResolver.relative(path)
        try checkReadable(relative, by: connection.caller)
        let id = clients.nextID.add(1, ordering: .relaxed).oldValue
        var rooted = relative
        rooted.root = "/"
        let presenter = RemotePresenter(id: id, path: rooted, connection: connection)
        presenter.registry = center.presenters
        beginDemand()
        clients.presenters.withLock { $0[id] = presenter }
        center.presenters.add(presenter, uid: connection.caller.uid,
                              purpose: purposes.purpose(ofThread: connection.caller.pid))
        connection.onClose { [self] in unregisterPresenter(id, clients: clients) }
        return id
    }

    public func unregisterPresenter(_ id: Int, clients: MountClients) {
        guard let presenter = clients.presenters.withLock({ $0.removeValue(forKey: id) }) else { return }
        center.presenters.remove(presenter)
        presenter.abandon()
        endDemand()
    }

    /// The caller's presenters (root sees everyone's).
    public func listPresenters(for caller: Caller, clients: MountClients) -> [[String: String]] {
        clients.presenters.withLock { $0.values }
            .filter { caller.isRoot || $0.uid == caller.uid }
            .sorted { $0.id < $1.id }
            .map { ["presenter": "\($0.id)", "path": (center.presenters.presentedPath(of: $0) ?? $0.path).string, "uid": "\($0.uid)"] }
    }

    public func answerPresenterRequest(presenter: Int, request: Int, errno: Int32, caller: Caller, clients: MountClients) {
        guard let p = clients.presenters.withLock({ $0[presenter] }), p.uid == caller.uid || caller.isRoot else { return }
        p.answer(request, errno: errno)
    }

    /// Tells remote presenters of a change found by watching the store (docs/SEMANTICS.md §3: marked
    /// uncoordinated). Matching by path, as the registry does for coordinated events.
    public func tellUncoordinated(_ event: PresenterEvent, clients: MountClients) {
        let all = clients.presenters.withLock { Array($0.values) }
        for presenter in all {
            let mine = center.presenters.presentedPath(of: presenter) ?? presenter.path
            if let notification = Self.notification(for: event, presenting: mine) { presenter.tellUncoordinated(notification) }
        }
    }

    static func notification(for event: PresenterEvent, presenting mine: FilePath) -> PresenterNotification? {
        switch event {
        case .changed(let p):
            if p == mine { return .didChange }
            return p.starts(with: mine) ? .subitemDidChange(at: p) : nil
        case .appeared(let p):
            if p == mine { return .didChange }
            return p.starts(with: mine) ? .subitemDidAppear(at: p) : nil
        case .deleted(let p):
            if p == mine || mine.starts(with: p) { return .didDelete }
            return p.starts(with: mine) ? .subitemDidDelete(at: p) : nil
        case .moved(let from, let to):
            if from == mine { return .didMove(to: to) }
            return from.starts(with: mine) || to.starts(with: mine) ? .subitemDidMove(from: from, to: to) : nil
        case .resync:
            return .resync
        }
    }

    // MARK: Explicit claims

    /// Takes an explicit claim for the connection's process and its descendants (a
    /// `coordinate` session); blocks this control thread until granted or refused.
    public func claim(path: FilePath, reading: CoordinatedReadingOptions?, writing: CoordinatedWritingOptions?,
                      timeout: Duration?, connection: ControlConnection, clients: MountClients) throws(FileManagerError) -> Int {
        let relative = VolumeClaimResolver.relative(path)
        try checkReadable(relative, by: connection.caller)
        let resolved = center.resolver.target(for: relative, resolvingSymlink: false)
        let claim = reading.map { Claim(target: resolved.target, reading: $0, path: relative) }
            ?? Claim(target: resolved.target, writing: writing ?? [], path: relative)
        let pid = connection.caller.pid
        let purpose = Purpose.process(pid)
        purposes.beginSession(pid: pid, purpose: purpose)
        beginDemand()
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<Result<CoordinatedAccess, CoordinationError>?>(nil)
        center.beginAccess([claim], purpose: purpose, accessorUID: connection.caller.uid, lifetime: .explicit,
                           deadline: ContinuousClock.now + (timeout ?? contentDeadline)) { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        switch outcome.withLock({ $0! }) {
        case .failure(let error):
            purposes.endSession(pid: pid)
            endDemand()
            throw FileManagerError(error.errno, path: relative.string)
        case .success(let access):
            // Readers' cached pages may have been written meanwhile: make later reads come to us.
            if writing != nil, let inode = resolved.target.chain.last, volume.item(inode) != nil {
                volume.notify { $0.itemChanged(inode) }
            }
            let id = clients.nextID.add(1, ordering: .relaxed).oldValue
            clients.claims.withLock { $0[id] = (access, pid) }
            connection.onClose { [self] in release(id, clients: clients) }
            return id
        }
    }

    public func release(_ id: Int, clients: MountClients) {
        guard let (access, pid) = clients.claims.withLock({ $0.removeValue(forKey: id) }) else { return }
        access.end()
        if !clients.claims.withLock({ $0.values.contains { $0.pid == pid } }) { purposes.endSession(pid: pid) }
        endDemand()
    }

    /// A user may coordinate or present only items they may read (root anything); a missing
    /// item is judged by its deepest existing ancestor.
    func checkReadable(_ relative: FilePath, by caller: Caller) throws(FileManagerError) {
        guard !caller.isRoot else { return }
        var dir = FilePath(volume.store.path.string)
        for (i, c) in relative.components.enumerated() {
            let next = (i == 0 && c.string.hasPrefix(".Trash-")) ? dir.appending("trash").appending(c) : dir.appending(c)
            // lstat, and stop at a symlink: the daemon never follows a link in the store
            // (docs/SEMANTICS.md §6); what lies past it is judged as missing, by its ancestors.
            var st = stat()
            guard lstat(next.string, &st) == 0, (st.st_mode & S_IFMT) != S_IFLNK else { break }
            let bits: mode_t = st.st_uid == caller.uid ? 0o400 : (st.st_gid == caller.gid ? 0o040 : 0o004)
            let search: mode_t = st.st_uid == caller.uid ? 0o100 : (st.st_gid == caller.gid ? 0o010 : 0o001)
            let isLast = i == relative.components.count - 1
            if (st.st_mode & (isLast ? bits : search)) == 0 { throw .permissionDenied(relative.string) }
            dir = next
        }
    }
}

/// Routes the store watcher's outside changes to remote presenters, marked uncoordinated.
public struct UncoordinatedChangeRouter: StoreChangeListener {
    let coordination: MountCoordination
    let clients: MountClients

    public init(coordination: MountCoordination, clients: MountClients) {
        self.coordination = coordination
        self.clients = clients
    }

    public var wantsStoreChanges: Bool { clients.presenters.withLock { !$0.isEmpty } }

    public func storeChanged(_ event: PresenterEvent) {
        coordination.tellUncoordinated(event, clients: clients)
    }
}
