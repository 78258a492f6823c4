import Glibc
import SystemPackage

extension ContainerRegistry {
    /// The directory every item replacement directory is made in.
    public static let temporaryItems = "tmp/TemporaryItems"

    /// Makes a fresh, uniquely named private directory (mode 0700, owned by `caller`) for
    /// building an item that will replace one in the container `id` (URLForDirectory's
    /// NSItemReplacementDirectory, reference containers-and-wrappers §2.3): in the same
    /// container, so the final rename never crosses containers, and under `tmp/`, so
    /// leftovers are purged. Named as Foundation names it, `(A Document Being Saved By
    /// PROGRAM)`, then ` 2`, ` 3`, … Returns its path relative to the mount.
    public func makeItemReplacementDirectory(in id: BundleIdentifier, caller: Caller, program: String = "containerfs",
                                             hooks: StoreChangeHooks = .direct) throws(FileManagerError) -> FilePath {
        try authorize(caller, id, to: "make an item replacement directory in it")
        let tmp = try openContainerDirectory(id, "tmp")
        defer { Syscall.close(tmp) }
        let parent = FilePath("containers/\(id)/\(Self.temporaryItems)")
        let items: FilePath.Component = "TemporaryItems"
        do {
            try hooks.changing(tmp, items, at: parent) { () throws(Errno) in
                do throws(Errno) {
                    try Credentials.asCaller(caller) { () throws(Errno) in try Syscall.mkdirat(tmp, "TemporaryItems", 0o700) }
                } catch .fileExists {
                } catch {
                    throw error
                }
            }
        } catch {
            throw FileManagerError(error, path: parent.string)
        }
        let itemsFD = try openContainerDirectory(id, Self.temporaryItems)
        defer { Syscall.close(itemsFD) }
        let base = "(A Document Being Saved By \(program))"
        for n in 1...CollisionNames.limit {
            let text = n == 1 ? base : "\(base) \(n)"
            guard let name = FilePath.Component(text) else { throw .invalidArgument(text) }
            do {
                try hooks.changing(itemsFD, name, at: parent.appending(name)) { () throws(Errno) in
                    try Credentials.asCaller(caller) { () throws(Errno) in
                        try text.withName { p throws(Errno) in
                            try Syscall.mkdirat(itemsFD, p, 0o700)
                            try Syscall.fchmodat(itemsFD, p, 0o700)  // whatever the umask
                        }
                    }
                }
            } catch .fileExists {
                continue
            } catch {
                throw FileManagerError(error, path: parent.appending(name).string)
            }
            hooks.announce(parent.appending(name), true)
            return parent.appending(name)
        }
        throw .itemExists("\(parent)/\(base): \(CollisionNames.limit) names taken")
    }
}
