import Glibc
import SystemPackage

/// Decides what a caller may do from modes and owners, for callers other than this process
/// (a FUSE request, a CLI client) and for the questions the kernel has no call for
/// (`isDeletableFile`). Uses the caller's *real* ids (docs/SEMANTICS.md §8.7).
///
/// Mode bits only: ACLs and capabilities other than root's are not modelled. Supplementary
/// groups come from this process when the caller is this process, otherwise from the group
/// database for the caller's user name.
struct AccessCheck {
    let uid: uid_t
    let groups: Set<gid_t>

    init(_ caller: Caller) {
        uid = caller.uid
        var groups: Set<gid_t> = [caller.gid]
        if caller.uid == getuid() && caller.gid == getgid() {
            groups.formUnion(Syscall.supplementaryGroups())
        } else {
            groups.formUnion(Self.groupList(caller.uid, caller.gid))
        }
        self.groups = groups
    }

    var isRoot: Bool { uid == 0 }

    /// Whether the caller may `want` (`R_OK | W_OK | X_OK` bits) on the item `st` describes.
    func permits(_ want: CInt, _ st: stat) -> Bool {
        if isRoot {
            // Root reads and writes anything; it executes only what someone may execute.
            guard want & X_OK != 0 else { return true }
            return (st.st_mode & S_IFMT) == S_IFDIR || st.st_mode & 0o111 != 0
        }
        let bits: mode_t
        if st.st_uid == uid {
            bits = (st.st_mode >> 6) & 7
        } else if groups.contains(st.st_gid) {
            bits = (st.st_mode >> 3) & 7
        } else {
            bits = st.st_mode & 7
        }
        return mode_t(want) & ~bits == 0
    }

    /// Whether every directory above the final component of `path` is searchable: stat each
    /// prefix from the root (links among them followed, as path resolution does).
    func canSearchParents(of path: FilePath) -> Bool {
        func searchable(_ directory: FilePath) -> Bool {
            guard let st = try? directory.withName({ p throws(Errno) in try Syscall.fstatat(AT_FDCWD, p, 0) }) else { return false }
            return permits(X_OK, st)
        }
        var prefix = FilePath("/")
        guard searchable(prefix) else { return false }
        for component in path.components.dropLast() {
            prefix.append(component)
            guard searchable(prefix) else { return false }
        }
        return true
    }

    /// Linux's rule for unlinking `item` from the directory `parent` (unlink(2), EACCES and
    /// EPERM): write and search on the parent; in a sticky parent, also owning the item or the
    /// parent (root is exempt: CAP_FOWNER).
    func mayUnlink(_ item: stat, from parent: stat) -> Bool {
        guard permits(W_OK | X_OK, parent) else { return false }
        if parent.st_mode & S_ISVTX != 0 && !isRoot {
            return item.st_uid == uid || parent.st_uid == uid
        }
        return true
    }

    private static func groupList(_ uid: uid_t, _ gid: gid_t) -> [gid_t] {
        guard let name = AccountNames.userName(uid) else { return [] }
        var count: CInt = 64
        while true {
            var groups = [gid_t](repeating: 0, count: Int(count))
            let rc = groups.withUnsafeMutableBufferPointer { getgrouplist(name, gid, $0.baseAddress, &count) }
            if rc >= 0 { return Array(groups[0..<Int(count)]) }
            if count <= groups.count { return [] }  // failed without asking for more room
        }
    }
}
