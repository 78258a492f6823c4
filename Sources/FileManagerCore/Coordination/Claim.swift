import SystemPackage

/// How a claim competes for its key (docs/SEMANTICS.md §3.1).
public enum ClaimMode: Sendable, Hashable {
    /// Shares with reads of the same item (R1).
    case read
    /// Excludes reads and writes of the same item, nothing else (R1, R3).
    case write
    /// A write ForDeleting, ForMoving or ForReplacing on a directory: the directory and
    /// everything inside it interact as one item (R4).
    case subtreeWrite
    /// A read of a directory and everything inside it, as one item (a snapshot's freeze,
    /// docs/DESIGN.md 57): shares with reads anywhere, excludes writes of the directory and
    /// of anything inside it, and writes of an enclosing directory only as a subtree write.
    case subtreeRead
}

/// How long a granted claim may be held, which matters only to deadlock detection.
public enum ClaimLifetime: Sendable, Hashable {
    /// A FUSE callback's short claim: held only while one operation runs, never while
    /// waiting for another claim, so it can never be the held half of a deadlock (docs/SEMANTICS.md §3.1).
    case callback
    /// An explicit claim (`containerfs coordinate`, the Swift API) that lasts while its
    /// holder may go on to wait for other claims.
    case explicit
}

/// One item of a coordinated access: the target, what is done to it, and (for presenter
/// messages) the path it is known by.
public struct Claim: Sendable, Hashable {
    /// What the access uses the item for.
    public enum Access: Sendable, Hashable {
        case reading(CoordinatedReadingOptions)
        case writing(CoordinatedWritingOptions)
    }

    public var target: ClaimTarget
    public var access: Access
    /// The item's path, for presenter messages that carry one (subitem deletion). The
    /// claim table never looks at it.
    public var path: FilePath?
    /// The mode the claim table uses, computed once: a subtree write on a directory, and
    /// a plain write for a "subtree" option on a file  or inside a package (R2: the
    /// package is the item).
    public let mode: ClaimMode

    /// A read of `target` with `options`.
    public init(target: ClaimTarget, reading options: CoordinatedReadingOptions = [], path: FilePath? = nil) {
        self.target = target
        self.access = .reading(options)
        self.path = path
        self.mode = .read
    }

    /// A write of `target` with `options`.
    public init(target: ClaimTarget, writing options: CoordinatedWritingOptions = [], path: FilePath? = nil) {
        self.target = target
        self.access = .writing(options)
        self.path = path
        let subtree = target.isDirectory && !target.isInsidePackage
            && !options.isDisjoint(with: CoordinatedWritingOptions.subtreeOptions)
        self.mode = subtree ? .subtreeWrite : .write
    }

    /// A read of `target` and, for a directory outside a package, of everything inside it
    /// (`.subtreeRead`); inside a package, or for a file, a plain read (R2: the package is
    /// the item already).
    public init(target: ClaimTarget, readingSubtree options: CoordinatedReadingOptions, path: FilePath? = nil) {
        self.target = target
        self.access = .reading(options)
        self.path = path
        self.mode = target.isDirectory && !target.isInsidePackage ? .subtreeRead : .read
    }

    /// A claim given by mode alone (no presenter semantics beyond the mode's): `.read` is a
    /// read with options 0, `.write` a plain write, `.subtreeWrite` a write ForMoving
    /// (which asks no presenter to accommodate a deletion).
    public init(target: ClaimTarget, mode: ClaimMode, path: FilePath? = nil) {
        switch mode {
        case .read: self.init(target: target, reading: [], path: path)
        case .write: self.init(target: target, writing: [], path: path)
        case .subtreeWrite: self.init(target: target, writing: .forMoving, path: path)
        case .subtreeRead: self.init(target: target, readingSubtree: [], path: path)
        }
    }

    var isRead: Bool { mode == .read || mode == .subtreeRead }

    /// Whether this claim and `other`, made for different purposes, cannot be granted
    /// together: the conflict matrix of docs/SEMANTICS.md §3.1 on the keys R2 gives.
    @inline(__always)
    func conflicts(with other: Claim) -> Bool {
        let a = target.chain, b = other.target.chain
        let na = target.effectiveCount, nb = other.target.effectiveCount
        if na == nb {
            guard ClaimTarget.isPrefix(a, na, of: b, nb) else { return false }
            return !(isRead && other.isRead)
        }
        if na < nb {
            // This claim is on an ancestor of the other: only a subtree claim reaches down.
            return reachesDown(to: other) && ClaimTarget.isPrefix(a, na, of: b, nb)
        }
        return other.reachesDown(to: self) && ClaimTarget.isPrefix(b, nb, of: a, na)
    }

    /// Whether this claim, on an ancestor of `other`'s item, competes with it: a subtree
    /// write with everything, a subtree read with writes.
    @inline(__always)
    private func reachesDown(to other: Claim) -> Bool {
        mode == .subtreeWrite || (mode == .subtreeRead && !other.isRead)
    }
}

extension Array where Element == Claim {
    /// Whether any claim here conflicts with any claim of `other` (different purposes).
    @inline(__always)
    func conflicts(with other: [Claim]) -> Bool {
        for a in self {
            for b in other where a.conflicts(with: b) { return true }
        }
        return false
    }
}
