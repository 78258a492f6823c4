import Dispatch
import Glibc
import Synchronization
import SystemPackage

/// The presenters of one `CoordinationCenter` (process-wide for `CoordinationCenter.shared`,
/// as Apple's `addFilePresenter` is): who presents what, who must be asked before an access
/// (`PresenterRegistry+Selection.swift`) and told after it (`announce`).
///
/// Each registration gets its own serial queue (targeting the presenter's
/// `presentedItemOperationQueue` when it has one): every message to that presenter runs
/// there, so they arrive one at a time and in the order they were sent.
///
/// The registry follows each presenter's item itself: moves rewrite its path (and the paths
/// of presenters inside a moved directory), a replaced or deleted item's presenter stays
/// on the path (docs/SEMANTICS.md §3.6).
///
/// Lock order: `entries` before `Entry.state`; `purposes` alone. No presenter code runs
/// under any of them — messages are only *enqueued* on presenters' queues while `entries`
/// is held, which is what keeps one presenter's events in commit order across announcing
/// threads.
public final class PresenterRegistry: Sendable {
    /// One registration.
    final class Entry: Sendable {
        struct State {
            /// Normalised path of the presented item; nil until the presenter has one.
            var path: FilePath?
            /// Cached `resolver.identityChain(for: path)`; nil when it must be recomputed.
            var chain: [UInt64]?
            /// Consecutive before-access requests answered after the deadline.
            var misses = 0
        }

        let id: UInt64
        let presenter: any FilePresenter
        let purpose: Purpose
        let uid: UInt32
        let queue: DispatchQueue
        /// Protected by itself; taken after `PresenterRegistry.entries`, never before.
        let state: Mutex<State>

        init(id: UInt64, presenter: any FilePresenter, purpose: Purpose, uid: UInt32, path: FilePath?) {
            self.id = id
            self.presenter = presenter
            self.purpose = purpose
            self.uid = uid
            self.queue = DispatchQueue(label: "containerfs.presenter.\(id)", target: presenter.presentedItemOperationQueue)
            self.state = Mutex(State(path: path))
        }

        /// Sends `notification` to the presenter on its queue.
        func deliver(_ notification: PresenterNotification) {
            let presenter = self.presenter
            queue.async { presenter.handle(notification) }
        }
    }

    private struct PurposeRecord {
        weak var presenter: (any FilePresenter)?
        let identifier: String
        let purpose: Purpose
    }

    /// Registrations in the order they were made. See the lock order above.
    let entries = Mutex<[Entry]>([])
    private let purposes = Mutex<[ObjectIdentifier: PurposeRecord]>([:])
    /// `entries.count`, readable without the lock: the access fast path checks it.
    private let entryCount = Atomic<Int>(0)
    private let nextEntryID = Atomic<UInt64>(1)
    let resolver: any ClaimTargetResolver
    /// Consecutive missed deadlines after which a presenter is unregistered (docs/SEMANTICS.md §3.4).
    let maximumMisses: Int

    init(resolver: any ClaimTargetResolver, maximumMisses: Int) {
        self.resolver = resolver
        self.maximumMisses = maximumMisses
    }

    // MARK: - Registration

    /// Registers `presenter` (once: a second add of the same object is ignored). `uid` is the
    /// user it acts for: only presenters of the accessor's uid, or root's, are asked before
    /// an access and may delay or refuse it; others are only told afterwards (docs/SEMANTICS.md §3).
    /// Register inside a coordinated read of the item to be sure not to miss a write that
    /// starts meanwhile .
    /// `purpose` overrides the presenter's own (a presenter of another process, registered
    /// over the control socket, has that process's purpose).
    public func add(_ presenter: any FilePresenter, uid: UInt32 = getuid(), purpose: Purpose? = nil) {
        let purpose = purpose ?? self.purpose(of: presenter)
        let path = presenter.presentedItemURL.map(\.coordinationNormalized)
        let entry = Entry(id: nextEntryID.add(1, ordering: .relaxed).oldValue, presenter: presenter,
                          purpose: purpose, uid: uid, path: path)
        entries.withLock { list in
            guard !list.contains(where: { $0.presenter === presenter }) else { return }
            list.append(entry)
            entryCount.store(list.count, ordering: .releasing)
        }
    }

    /// Unregisters `presenter`; nothing happens if it is not registered .
    public func remove(_ presenter: any FilePresenter) {
        entries.withLock { list in
            list.removeAll { $0.presenter === presenter }
            entryCount.store(list.count, ordering: .releasing)
        }
    }

    /// The registered presenters, in registration order.
    public var presenters: [any FilePresenter] {
        entries.withLock { $0.map(\.presenter) }
    }

    /// Whether nobody is registered (one atomic load).
    public var isEmpty: Bool { entryCount.load(ordering: .acquiring) == 0 }

    /// The path the registry currently has for `presenter` (after moves), if registered.
    public func presentedPath(of presenter: any FilePresenter) -> FilePath? {
        entries.withLock { list in list.first { $0.presenter === presenter }?.state.withLock { $0.path } }
    }

    /// The purpose of `presenter`: coordinators created with it share it , its own
    /// accesses never reach it (R7) and its saves pass the read that asked for them (R8).
    public func purpose(of presenter: any FilePresenter) -> Purpose {
        record(of: presenter).purpose
    }

    /// The `purposeIdentifier` behind `purpose(of:)`.
    public func purposeIdentifier(of presenter: any FilePresenter) -> String {
        record(of: presenter).identifier
    }

    private func record(of presenter: any FilePresenter) -> PurposeRecord {
        let key = ObjectIdentifier(presenter)
        return purposes.withLock { table in
            if let r = table[key], let p = r.presenter, p === presenter { return r }
            if table.count >= 64 { table = table.filter { $0.value.presenter != nil } }
            let identifier = makeRandomPurposeIdentifier()
            let record = PurposeRecord(presenter: presenter, identifier: identifier,
                                       purpose: (try? Purpose(identifier: identifier)) ?? .unique())
            table[key] = record
            return record
        }
    }

    /// Gives a presenter that has no path yet the path its own coordinated write created
    /// (an untitled document saved for the first time).
    func bindIfUnbound(_ presenter: any FilePresenter, to path: FilePath) {
        let normalized = path.coordinationNormalized
        entries.withLock { list in
            guard let e = list.first(where: { $0.presenter === presenter }) else { return }
            e.state.withLock { st in
                if st.path == nil {
                    st.path = normalized
                    st.chain = nil
                }
            }
        }
    }

    /// Fills in the path of presenters registered without one whose `presentedItemURL` now
    /// has one. Reads presenter properties, so never under a lock.
    func refreshUnboundPaths(_ list: [Entry]) {
        for e in list where e.state.withLock({ $0.path == nil }) {
            guard let url = e.presenter.presentedItemURL else { continue }
            let normalized = url.coordinationNormalized
            e.state.withLock { st in
                if st.path == nil { st.path = normalized }
            }
        }
    }

    // MARK: - Deadlines

    /// Records how a presenter answered a before-access request. A miss enqueues `resync`
    /// (it runs once the presenter's queue is free again, i.e. after its late answer); too
    /// many misses in a row unregister it.
    func recordAnswer(of entry: Entry, onTime: Bool) {
        let misses = entry.state.withLock { st -> Int in
            st.misses = onTime ? 0 : st.misses + 1
            return st.misses
        }
        guard !onTime else { return }
        entry.deliver(.resync)
        if misses >= maximumMisses {
            entries.withLock { list in
                list.removeAll { $0 === entry }
                entryCount.store(list.count, ordering: .releasing)
            }
        }
    }

    // MARK: - After the access

    /// Tells every presenter concerned that `event` was committed (docs/SEMANTICS.md §3.6), except those of
    /// `purpose` (R7: an accessor's own presenter hears nothing of its own accesses; pass
    /// nil for changes nobody coordinated). Call it while the access's claim is still held,
    /// so that the order of announcements is the commit order.
    public func announce(_ event: PresenterEvent, by purpose: Purpose?) {
        if isEmpty { return }
        refreshUnboundPaths(entries.withLock { $0 })
        let event = event.normalized
        entries.withLock { list in
            for e in list {
                let notes = e.state.withLock { Self.notifications(for: event, updating: &$0) }
                guard e.purpose != purpose else { continue }
                for n in notes { e.deliver(n) }
            }
        }
    }

    /// What a presenter whose state is `st` hears of `event`, updating its path when its
    /// item moved. Always computed (also for the announcer's own presenters, which must
    /// follow their item too); delivery decides who is told.
    static func notifications(for event: PresenterEvent, updating st: inout Entry.State) -> [PresenterNotification] {
        guard let path = st.path else { return [] }
        switch event {
        case .changed(let x):
            if path == x { return [.didChange] }
            return x.isInside(path) ? [.subitemDidChange(at: x)] : []
        case .appeared(let x):
            if path.isSameOrInside(x) { st.chain = nil }
            if path == x { return [.didChange] }
            return x.isInside(path) ? [.subitemDidAppear(at: x)] : []
        case .moved(let from, let to):
            if path.isSameOrInside(from) {
                let moved = path.replacingPrefix(from, with: to)
                st.path = moved
                st.chain = nil
                return [.didMove(to: moved)]
            }
            if path.isSameOrInside(to) {
                // The item at `to` was replaced (safe-save): its presenter stays with the path.
                st.chain = nil
                return path == to ? [.didChange] : []
            }
            return from.isInside(path) || to.isInside(path) ? [.subitemDidMove(from: from, to: to)] : []
        case .deleted(let x):
            if path.isSameOrInside(x) {
                st.chain = nil
                return [.didDelete]
            }
            return x.isInside(path) ? [.subitemDidDelete(at: x)] : []
        case .resync(let x):
            return x.map { path.isSameOrInside($0) } ?? true ? [.resync] : []
        }
    }
}

extension PresenterEvent {
    /// The event with every path normalised as registered paths are.
    var normalized: PresenterEvent {
        switch self {
        case .changed(let p): return .changed(p.coordinationNormalized)
        case .appeared(let p): return .appeared(p.coordinationNormalized)
        case .moved(let a, let b): return .moved(from: a.coordinationNormalized, to: b.coordinationNormalized)
        case .deleted(let p): return .deleted(p.coordinationNormalized)
        case .resync(let p): return .resync(p?.coordinationNormalized)
        }
    }
}
