import Glibc

/// What a regular file's content was, as far as its modification time and size tell: the
/// content the kernel's cached pages of the file were last known to show is kept as one
/// (`Item.pagesShow`), and an open compares it with the file's now (`Volume.open`).
///
/// Why mtime and size, not ctime: the daemon's own renames, links and extended attributes
/// move the ctime and leave the content alone; a write or truncation moves the mtime (a
/// program that sets it back afterwards with `utimens` queues IN_ATTRIB, which the watcher
/// hears). Since the kernel's multigrain timestamps (6.13), a change made after the time was
/// read gets a fine-grained one, and the daemon reads it at every open and close.
struct ContentStamp {
    /// Nothing known of the pages: an open takes the content it finds as theirs (a new
    /// inode in the kernel has none).
    static let unknown: UInt64 = 0
    /// The pages may show content that is no longer there: the next open drops them.
    static let doubtful: UInt64 = .max

    /// Never `unknown` nor `doubtful`.
    static func of(_ st: stat) -> UInt64 {
        let mtime = UInt64(bitPattern: Int64(st.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(st.st_mtim.tv_nsec))
        let stamp = (mtime &* 0x9E37_79B9_7F4A_7C15) ^ UInt64(bitPattern: Int64(st.st_size))
        return stamp == unknown || stamp == doubtful ? 1 : stamp
    }
}
