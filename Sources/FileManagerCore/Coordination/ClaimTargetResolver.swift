import CLinux
import Glibc
import SystemPackage

/// Turns a path into the `ClaimTarget` the claim table and presenter registry use.
/// Pluggable so that one `CoordinationCenter` works on identities of one kind: the
/// in-process Swift API hashes path prefixes (`PathClaimResolver`); the daemon supplies a
/// resolver that walks its `Volume` and answers inode chains, so claims follow items
/// across renames and the FUSE bridge's own targets (built from `Item` parent links)
/// compare with the Swift API's.
public protocol ClaimTargetResolver: Sendable {
    /// The target for `path`, and the path actually coordinated (after following a final
    /// symbolic link when `resolvingSymlink`, for `CoordinatedReadingOptions.resolvesSymbolicLink`).
    /// A path that does not exist yet still gets a target (creating is a write on it).
    func target(for path: FilePath, resolvingSymlink: Bool) -> ResolvedClaimTarget
    /// Just the identity chain of `path`: what presenters are matched by. Must agree with
    /// `target(for:resolvingSymlink: false).target.chain`.
    func identityChain(for path: FilePath) -> [UInt64]
}

/// A resolver's answer.
public struct ResolvedClaimTarget: Sendable, Hashable {
    public var target: ClaimTarget
    public var path: FilePath
    public init(target: ClaimTarget, path: FilePath) {
        self.target = target
        self.path = path
    }
}

/// The in-process resolver: identity = a 64-bit FNV-1a hash of the normalised absolute
/// path prefix ("/", "/a", "/a/b", …), so the chain is computed without touching the file
/// system and an ancestor's identity is always a prefix of its descendants' chains.
///
/// Consequences, accepted for in-process use: identities follow **paths**, not items — a
/// claim on `/a/f` does not follow the file when it is renamed (the coordinator re-resolves
/// a waiting access whose intent moved), two hard links are two items, and two different
/// paths collide with probability 2⁻⁶⁴. The daemon's inode resolver has none of these.
///
/// Packages: a directory whose name ends in one of `packageExtensions` (case-insensitive),
/// or that carries the xattr `user.containerfs.package=1` (docs/SEMANTICS.md §1). A name that does not
/// exist yet but has a package extension counts as a package (it is being created).
public struct PathClaimResolver: ClaimTargetResolver {
    public static let defaultPackageExtensions: Set<String> = ["app", "bundle", "rtfd", "pages"]
    public static let packageAttribute = "user.containerfs.package"

    public var packageExtensions: Set<String>
    public var checksPackageAttribute: Bool

    public init(packageExtensions: Set<String> = PathClaimResolver.defaultPackageExtensions,
                checksPackageAttribute: Bool = true) {
        self.packageExtensions = Set(packageExtensions.map { $0.lowercased() })
        self.checksPackageAttribute = checksPackageAttribute
    }

    public func identityChain(for path: FilePath) -> [UInt64] {
        Self.chain(ofNormalized: path.normalizedPathBytes())
    }

    public func target(for path: FilePath, resolvingSymlink: Bool) -> ResolvedClaimTarget {
        var bytes = path.normalizedPathBytes()
        var info = stat()
        var exists = Self.withCString(bytes) { lstat($0, &info) } == 0
        if resolvingSymlink, exists, info.st_mode & S_IFMT == S_IFLNK,
           let real = Self.withCString(bytes, { realpath($0, nil) }) {
            bytes = FilePath(platformString: real).normalizedPathBytes()
            free(real)
            exists = Self.withCString(bytes) { stat($0, &info) } == 0
        }
        let isDirectory = exists && info.st_mode & S_IFMT == S_IFDIR
        // Component boundaries: component k (1-based) is bytes[starts[k-1]..<ends[k-1]].
        var starts: [Int] = [], ends: [Int] = []
        var i = 1
        while i < bytes.count {
            starts.append(i)
            while i < bytes.count && bytes[i] != 0x2F { i += 1 }
            ends.append(i)
            i += 1
        }
        var packages: [Int] = []
        for k in starts.indices {
            let isLast = k == starts.count - 1
            if isLast && exists && !isDirectory { break }
            if hasPackageExtension(bytes[starts[k]..<ends[k]]) {
                packages.append(k + 1)
            } else if checksPackageAttribute, !isLast || exists,
                      Self.withCString(Array(bytes[0..<ends[k]]), { Self.hasPackageAttribute($0) }) {
                packages.append(k + 1)
            }
        }
        let chain = Self.chain(ofNormalized: bytes)
        let isPackage = !starts.isEmpty && packages.last == starts.count
        let resolved = Self.withCString(bytes) { FilePath(platformString: $0) }
        return ResolvedClaimTarget(
            target: ClaimTarget(chain: chain, isDirectory: isDirectory || (isPackage && !exists), packageIndices: packages),
            path: resolved)
    }

    /// FNV-1a over "/" then each component followed by "/": element `i` hashes the first
    /// `i` components, so it is the identity of that prefix.
    static func chain(of path: FilePath) -> [UInt64] {
        chain(ofNormalized: path.normalizedPathBytes())
    }

    /// `chain(of:)` for the bytes of a normalised absolute path ("/" or "/a/b", no
    /// trailing slash).
    static func chain(ofNormalized bytes: [UInt8]) -> [UInt64] {
        var chain: [UInt64] = []
        chain.reserveCapacity(8)
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        @inline(__always) func mix(_ byte: UInt8) {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        mix(0x2F)
        chain.append(hash)
        guard bytes.count > 1 else { return chain }
        for byte in bytes.dropFirst() {
            mix(byte)
            if byte == 0x2F { chain.append(hash) }
        }
        mix(0x2F)
        chain.append(hash)
        return chain
    }

    /// Whether the component's extension (after its last `.`, which must not be its first
    /// byte) is a package extension, ignoring ASCII case.
    private func hasPackageExtension(_ component: ArraySlice<UInt8>) -> Bool {
        guard let dot = component.lastIndex(of: 0x2E), dot > component.startIndex, dot < component.endIndex - 1 else {
            return false
        }
        let ext = String(decoding: component[(dot + 1)...].map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 32 : $0 }, as: UTF8.self)
        return packageExtensions.contains(ext)
    }

    private static func withCString<R>(_ bytes: [UInt8], _ body: (UnsafePointer<CChar>) -> R) -> R {
        var terminated = bytes
        terminated.append(0)
        return terminated.withUnsafeBufferPointer { b in
            b.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) }
        }
    }

    /// Follows a symbolic link at `path` (only directories are asked, and a link to a
    /// package directory presents that package).
    private static func hasPackageAttribute(_ path: UnsafePointer<CChar>) -> Bool {
        var value: (UInt8, UInt8) = (0, 0)
        let n = withUnsafeMutableBytes(of: &value) { buffer in
            clinux_getxattr(path, packageAttribute, buffer.baseAddress, buffer.count)
        }
        return n == 1 && value.0 == UInt8(ascii: "1")
    }
}
