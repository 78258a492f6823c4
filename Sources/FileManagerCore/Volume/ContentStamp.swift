import Glibc

/// What a regular file's content was, as far as its modification time and size tell
/// (`Item.pagesShow`). Mtime and size, not ctime: renames, links and extended attributes
/// move the ctime and leave the content alone.
struct ContentStamp {
    /// Nothing known.
    static let unknown: UInt64 = 0

    /// Never `unknown`.
    static func of(_ st: stat) -> UInt64 {
        let mtime = UInt64(bitPattern: Int64(st.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(st.st_mtim.tv_nsec))
        let stamp = (mtime &* 0x9E37_79B9_7F4A_7C15) ^ UInt64(bitPattern: Int64(st.st_size))
        return stamp == unknown ? 1 : stamp
    }
}
