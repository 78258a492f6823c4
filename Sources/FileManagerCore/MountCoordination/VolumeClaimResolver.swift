import Glibc
import SystemPackage

/// The daemon's `ClaimTargetResolver`: paths relative to the mount resolve to chains of
/// backing inode numbers, the same identities the FUSE bridge builds from `Item` parent
/// links, so an explicit claim taken by path (`containerfs coordinate`) and a kernel request
/// on the item meet in one claim table, and claims follow items across renames.
///
/// A name that does not exist yet gets a synthetic identity under its deepest existing
/// ancestor (a hash of the remaining components with the top bit set, which no inode number
/// has), so creating it is a write on something, and two creators of one name meet.
public struct VolumeClaimResolver: ClaimTargetResolver {
    let volume: Volume

    public init(volume: Volume) { self.volume = volume }

    public func identityChain(for path: FilePath) -> [UInt64] {
        target(for: path, resolvingSymlink: false).target.chain
    }

    public func target(for path: FilePath, resolvingSymlink: Bool) -> ResolvedClaimTarget {
        let relative = VolumeClaimResolver.relative(path)
        let (chain, isDirectory, exists) = volume.resolve(relative)
        var full = chain
        if !exists {
            let missing = relative.components.dropFirst(chain.count - 1)
            full.append(VolumeClaimResolver.syntheticIdentity(parent: chain.last ?? Volume.rootInode, missing.map { $0.string }))
        }
        let packages = VolumeClaimResolver.packageIndices(relative)
        return ResolvedClaimTarget(target: ClaimTarget(chain: full, isDirectory: exists && isDirectory, packageIndices: packages),
                                   path: relative)
    }

    /// Paths are relative to the mount; a leading `/` is tolerated.
    static func relative(_ path: FilePath) -> FilePath {
        var p = path.lexicallyNormalized()
        p.root = nil
        return p
    }

    /// The identity of a name that does not exist yet.
    public static func syntheticIdentity(parent: UInt64, _ names: [String]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325 ^ parent
        for name in names {
            for byte in name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
            hash = (hash ^ 0x2F) &* 0x0000_0100_0000_01b3
        }
        return hash | (1 << 63)
    }

    /// Chain indices (1 = first component) of package directories, by name
    /// (docs/SEMANTICS.md §1.3).
    static func packageIndices(_ relative: FilePath) -> [Int] {
        relative.components.enumerated().compactMap { index, c in
            isPackageName(c.string) ? index + 1 : nil
        }
    }

    static let packageExtensions: Set<String> = ["app", "bundle", "rtfd", "pages", "framework", "plugin"]

    static func isPackageName(_ name: String) -> Bool {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return false }
        return packageExtensions.contains(name[name.index(after: dot)...].lowercased())
    }
}
