import Glibc
import SystemPackage

/// A change of one entry that a core operation makes to the store.
public struct EntryChange: Sendable {
    /// The directory's backing inode number (its FUSE node id) and the entry's name.
    public var parent: UInt64
    public var name: FilePath.Component
    /// The entry's path relative to the mount.
    public var path: FilePath
    /// It goes (a purge); else it appears.
    public var deleting: Bool
}

/// How the daemon publishes a change it makes to the store itself (not through a kernel
/// request): `entry` runs the change as a coordinated write, expected by the store watcher
/// as the daemon's own, with the kernel told to forget what it cached (DESIGN.md 39);
/// `announce` tells presenters after it, with the mount-relative path and whether the item
/// appeared (else it went). The CLI on an unmounted store needs none of this: `.direct`
/// runs the change as it is.
public struct StoreChangeHooks: Sendable {
    public var entry: @Sendable (_ change: EntryChange, _ body: () throws -> Void) throws -> Void
    public var announce: @Sendable (_ path: FilePath, _ appeared: Bool) -> Void
    /// Whether the item with this backing inode is open through the mount.
    public var isOpen: @Sendable (_ inode: UInt64) -> Bool

    public init(entry: @escaping @Sendable (EntryChange, () throws -> Void) throws -> Void,
                announce: @escaping @Sendable (FilePath, Bool) -> Void,
                isOpen: @escaping @Sendable (UInt64) -> Bool) {
        self.entry = entry
        self.announce = announce
        self.isOpen = isOpen
    }

    public static let direct = StoreChangeHooks(entry: { _, body in try body() }, announce: { _, _ in }, isOpen: { _ in false })

    /// Runs `change` of the entry `name` of `parent`, known as `path`, through `entry`;
    /// errors other than the change's own (a coordination failure) keep their errno.
    func changing(_ parent: CInt, _ name: FilePath.Component, at path: FilePath, deleting: Bool = false,
                  _ change: () throws(Errno) -> Void) throws(Errno) {
        let inode = (try? Syscall.fstat(parent)).map { UInt64($0.st_ino) } ?? 0
        do {
            try entry(EntryChange(parent: inode, name: name, path: path, deleting: deleting)) { try change() }
        } catch let error as Errno {
            throw error
        } catch let error as FileManagerError {
            throw error.errno
        } catch {
            throw .ioError
        }
    }
}

extension ContainerRegistry {
    /// Checks that `caller` may act on the container `id` (its owner, or root), which must
    /// exist; returns its record.
    @discardableResult
    public func authorize(_ caller: Caller, _ id: BundleIdentifier, to action: String) throws(FileManagerError) -> ContainerRecord {
        guard let record = record(id) else { throw .noSuchItem("containers/\(id)") }
        guard caller.isRoot || caller.uid == record.ownerUID else {
            throw .permissionDenied("containers/\(id): only its owner (uid \(record.ownerUID)) or root may \(action)")
        }
        return record
    }

    /// Opens `containers/ID/RELATIVE` (`O_PATH`), one component at a time, never following
    /// a link: a link planted in the store must not lead the daemon elsewhere (SPEC §6).
    func openContainerDirectory(_ id: BundleIdentifier, _ relative: String) throws(FileManagerError) -> CInt {
        var path = "containers/\(id)"
        var fd: CInt
        do {
            fd = try id.rawValue.withName { p throws(Errno) in try Syscall.openat(store.containersFD, p, O_PATH | O_DIRECTORY | O_NOFOLLOW) }
        } catch {
            throw FileManagerError(error, path: path)
        }
        for component in relative.split(separator: "/") {
            path += "/\(component)"
            do {
                let next = try String(component).withName { p throws(Errno) in try Syscall.openat(fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW) }
                Syscall.close(fd)
                fd = next
            } catch {
                Syscall.close(fd)
                throw FileManagerError(error, path: path)
            }
        }
        return fd
    }

    /// A name for a scratch item in `.staging/`, unique to this process.
    func stagingName(_ prefix: String) -> String { "\(prefix).\(getpid()).\(UInt32.random(in: 0...UInt32.max))" }
}

extension String {
    /// `withCString` for a body that throws `Errno` only (a name the core made itself).
    func withName<R>(_ body: (UnsafePointer<CChar>) throws(Errno) -> R) throws(Errno) -> R {
        let result: Result<R, Errno> = withCString { p in
            do throws(Errno) { return .success(try body(p)) } catch { return .failure(error) }
        }
        return try result.get()
    }
}
