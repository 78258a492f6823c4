import Glibc

/// A file's identity: its device and inode numbers.
public struct FileIdentity: Hashable, Sendable {
    public let device: UInt64
    public let inode: UInt64

    public init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }

    /// The directory `dir` is open on and every directory above it up to `/`, nearest
    /// first, as the kernel walks `..` (symbolic links resolved, mount points crossed as it
    /// crosses them); empty if `dir` cannot be looked at. Bounded: a path has at most
    /// PATH_MAX / 2 components.
    public static func ancestry(of dir: CInt) -> [FileIdentity] {
        var chain: [FileIdentity] = []
        guard var fd = try? Syscall.openat(dir, ".", O_PATH | O_DIRECTORY) else { return chain }
        for _ in 0..<(Int(PATH_MAX) / 2) {
            guard let st = try? Syscall.fstat(fd) else { break }
            let id = FileIdentity(st)
            if chain.last == id { break }  // `/`: its `..` is itself
            chain.append(id)
            guard let parent = try? Syscall.openat(fd, "..", O_PATH | O_DIRECTORY) else { break }
            Syscall.close(fd)
            fd = parent
        }
        Syscall.close(fd)
        return chain
    }
}
