import Glibc
import Synchronization
import SystemPackage

/// Coordination as the mount daemon uses it: one `CoordinationCenter` over inode chains,
/// the purposes of processes, and a gate that keeps coordination off the hot path.
///
/// The gate: while no explicit claim, `coordinate` session or presenter exists, a kernel
/// request takes no claim at all (two atomic operations) — short claims of FUSE callbacks
/// only ever matter against explicit claims and presenters (docs/SEMANTICS.md §7: coordination must not
/// show in the figures). Entering "coordinated mode" waits until requests already past the
/// gate have finished, so none of them can overlap a claim granted afterwards (a Dekker-style
/// handshake on two sequentially consistent counters).
public final class MountCoordination: Sendable {
    public let center: CoordinationCenter
    public let purposes = ProcessPurposes()
    public let volume: Volume
    /// Deadline for content operations (open, read, write, truncate) and for namespace
    /// operations, which hold the kernel's directory locks while they wait (docs/SEMANTICS.md §3.3, §3.4).
    public let contentDeadline: Duration
    public let namespaceDeadline: Duration

    /// Explicit claims, sessions and presenters alive: > 0 means every request coordinates.
    private let demand = Atomic<Int>(0)
    /// Requests past the gate on the fast path, not yet finished.
    private let uncoordinated = Atomic<Int>(0)

    public init(volume: Volume, contentDeadline: Duration = .seconds(30), namespaceDeadline: Duration = .seconds(5),
                presenterDeadline: Duration = .seconds(5)) {
        self.volume = volume
        self.contentDeadline = contentDeadline
        self.namespaceDeadline = namespaceDeadline
        center = CoordinationCenter(resolver: VolumeClaimResolver(volume: volume),
                                    configuration: .init(claimTimeout: contentDeadline, presenterTimeout: presenterDeadline))
    }

    // MARK: - The gate

    /// True: the caller may proceed uncoordinated and must call `leaveFastPath()` after.
    @inline(__always)
    public func enterFastPath() -> Bool {
        if demand.load(ordering: .sequentiallyConsistent) != 0 { return false }
        uncoordinated.add(1, ordering: .sequentiallyConsistent)
        if demand.load(ordering: .sequentiallyConsistent) != 0 {
            uncoordinated.subtract(1, ordering: .sequentiallyConsistent)
            return false
        }
        return true
    }

    @inline(__always)
    public func leaveFastPath() {
        uncoordinated.subtract(1, ordering: .sequentiallyConsistent)
    }

    /// Something that needs every request coordinated begins (a claim, a session, a
    /// presenter). Waits (briefly: one request's duration) for fast-path requests in flight.
    /// Call only from threads that are not FUSE workers.
    public func beginDemand() {
        demand.add(1, ordering: .sequentiallyConsistent)
        while uncoordinated.load(ordering: .sequentiallyConsistent) != 0 { sched_yield() }
    }

    public func endDemand() {
        demand.subtract(1, ordering: .sequentiallyConsistent)
    }

    public var isCoordinating: Bool { demand.load(ordering: .relaxed) != 0 }

    // MARK: - Targets of items

    /// The claim target of an item the kernel names.
    public func target(of item: Item) -> ClaimTarget {
        let chain = volume.chain(of: item)
        return ClaimTarget(chain: chain, isDirectory: item.isDirectory, packageIndices: packageIndices(item, chainCount: chain.count))
    }

    /// The target of `name` in `parent`, whether it exists or not.
    public func target(of name: UnsafePointer<CChar>, in parent: Item) -> ClaimTarget {
        var chain = volume.chain(of: parent)
        var isDirectory = false
        if !parent.isVirtual, let st = try? Syscall.fstatat(parent.fd, name) {
            chain.append(UInt64(st.st_ino))
            isDirectory = (st.st_mode & S_IFMT) == S_IFDIR
        } else {
            chain.append(VolumeClaimResolver.syntheticIdentity(parent: parent.inode, [String(cString: name)]))
        }
        var packages = packageIndices(parent, chainCount: chain.count - 1)
        if VolumeClaimResolver.isPackageName(String(cString: name)) { packages.append(chain.count - 1) }
        return ClaimTarget(chain: chain, isDirectory: isDirectory, packageIndices: packages)
    }

    private func packageIndices(_ item: Item, chainCount: Int) -> [Int] {
        guard let path = volume.mountPath(of: item) else { return [] }
        return VolumeClaimResolver.packageIndices(path).filter { $0 < chainCount }
    }
}

// MARK: - Accesses of kernel requests

/// A kernel request's pending access, for cancelling it (FUSE_INTERRUPT).
public enum MountTicket: Sendable {
    case access(AccessTicket)
    case claim(ClaimTicket)
}

extension MountCoordination {
    /// Starts a short access for a kernel request; never blocks. With `asksPresenters`
    /// false only the claims are taken (reads and writes on a handle whose open already
    /// asked them). `completion` runs exactly once (see `CoordinationCenter.beginAccess`).
    public func begin(_ claims: [Claim], purpose: Purpose, accessorUID: UInt32, asksPresenters: Bool,
                      nonBlocking: Bool, deadline: ContinuousClock.Instant,
                      completion: @escaping @Sendable (Result<CoordinatedAccess, CoordinationError>) -> Void) -> MountTicket {
        if asksPresenters {
            return .access(center.beginAccess(claims, purpose: purpose, accessorUID: accessorUID, lifetime: .callback,
                                              nonBlocking: nonBlocking, deadline: deadline, completion: completion))
        }
        return .claim(center.claims.request(claims, purpose: purpose, lifetime: .callback, nonBlocking: nonBlocking,
                                            deadline: deadline) { result in
            completion(result.map { CoordinatedAccess(grant: $0, preparation: nil) })
        })
    }

    public func cancel(_ ticket: MountTicket) {
        switch ticket {
        case .access(let t): center.cancel(t)
        case .claim(let t): center.claims.cancel(t)
        }
    }
}
