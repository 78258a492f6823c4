/// What a claim is on: the chain of identities from the root of the tree to the item.
///
/// Identities are whatever the resolver uses — backing inode numbers for the daemon
/// (`Item.inode` with its parent links), hashes of path prefixes for the in-process Swift
/// API (`PathClaimResolver`) — but one claim table must only ever see one kind. Because
/// the chain starts at the root, "A is an ancestor of B" is "A's chain is a prefix of B's":
/// no tree walk and no lock on the tree.
///
/// Packages (R2): `packageMask` marks which elements of the chain are package directories.
/// The claim table keys a claim inside a package on its **outermost** package; presenter
/// selection uses every marked element, so nested packages all hear about it .
/// Packages deeper than 64 levels are not marked (the mask is one word, to stay free of
/// allocation); such an item is then coordinated as an ordinary item.
public struct ClaimTarget: Sendable, Hashable {
    /// Identities from the root (index 0) to the item itself (last). An empty chain means
    /// the root of everything, an ancestor of every other target.
    public var chain: [UInt64]
    /// Whether the item is a directory: only a directory write can be a subtree write.
    public var isDirectory: Bool
    /// Bit `i` set: `chain[i]` is a package directory.
    public var packageMask: UInt64

    /// A target whose outermost package, if any, is at `outermostPackageIndex`.
    public init(chain: [UInt64], isDirectory: Bool, outermostPackageIndex: Int? = nil) {
        self.chain = chain
        self.isDirectory = isDirectory
        if let i = outermostPackageIndex, i >= 0, i < min(chain.count, 64) {
            packageMask = 1 << UInt64(i)
        } else {
            packageMask = 0
        }
    }

    /// A target with every package directory of the chain named.
    public init(chain: [UInt64], isDirectory: Bool, packageIndices: some Sequence<Int>) {
        self.chain = chain
        self.isDirectory = isDirectory
        var mask: UInt64 = 0
        for i in packageIndices where i >= 0 && i < min(chain.count, 64) { mask |= 1 << UInt64(i) }
        packageMask = mask
    }

    /// The index in `chain` of the outermost package, if the item is or is inside one.
    public var outermostPackageIndex: Int? {
        packageMask == 0 ? nil : packageMask.trailingZeroBitCount
    }

    /// Whether the item itself is a package directory.
    public var isPackage: Bool {
        let last = chain.count - 1
        return last >= 0 && last < 64 && packageMask & (1 << UInt64(last)) != 0
    }

    /// How many elements of `chain` the claim table keys on: up to and including the
    /// outermost package (R2), else the whole chain.
    @inline(__always)
    var effectiveCount: Int {
        packageMask == 0 ? chain.count : packageMask.trailingZeroBitCount + 1
    }

    /// Whether the item is strictly inside a package (so its claims are the package's).
    var isInsidePackage: Bool { effectiveCount < chain.count }

    /// Whether `chain[0..<count]` is a prefix of `other[0..<otherCount]` (`count <=
    /// otherCount`). Compares the deepest element first: two unrelated items almost always
    /// differ there, so the common answer costs one comparison.
    @inline(__always)
    static func isPrefix(_ chain: [UInt64], _ count: Int, of other: [UInt64], _ otherCount: Int) -> Bool {
        if count == 0 { return true }
        if count > otherCount || chain[count - 1] != other[count - 1] { return false }
        var i = count - 2
        while i >= 0 {
            if chain[i] != other[i] { return false }
            i -= 1
        }
        return true
    }
}

extension ClaimTarget: Comparable {
    /// The canonical order of multi-item claims (docs/SEMANTICS.md §3.1): ancestors before descendants, then
    /// by identity. The claim table grants all items of one request atomically, so order
    /// cannot cause a deadlock there; it fixes the order presenters and logs see.
    public static func < (a: ClaimTarget, b: ClaimTarget) -> Bool {
        let n = min(a.chain.count, b.chain.count)
        for i in 0..<n where a.chain[i] != b.chain[i] { return a.chain[i] < b.chain[i] }
        return a.chain.count < b.chain.count
    }
}
