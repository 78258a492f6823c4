import FileManagerCore
import SystemPackage

/// Where a command that works on a store's items acts: the daemon of its live mount (`top`
/// is the mount point), or the store itself, under its lock when `exclusive`.
enum StoreTarget {
    case daemon(ControlClient, top: FilePath)
    case direct(Store, StoreLock?)

    /// The store at `store`, through its daemon when it is mounted.
    static func of(_ store: FilePath, exclusive: Bool = true) throws -> StoreTarget {
        switch try StoreOption.access(store, exclusive: exclusive) {
        case .daemon(let client):
            let status = try client.call("status").checked()
            return .daemon(client, top: FilePath(status.result?["mountPoint"] ?? "/"))
        case .direct(let opened, let lock):
            return .direct(opened, lock)
        }
    }

    /// Where `raw` is: a path under a live mount, or in a store's `containers/`; and the
    /// path relative to the mount root (or the store).
    static func of(path raw: String) throws -> (StoreTarget, relative: FilePath) {
        if let mounted = try? MountPath(raw) {
            return (.daemon(try mounted.connect(), top: mounted.mountPoint), mounted.relative)
        }
        let absolute = Paths.absolute(raw)
        var dir = absolute
        while !dir.isEmpty, dir != FilePath("/") {
            dir.removeLastComponent()
            if case .store = Store.find(at: dir) {
                var relative = absolute
                _ = relative.removePrefix(dir)
                return (try of(dir), relative)
            }
        }
        throw CommandFailure("\(absolute): not under a ContainerFS mount, nor in a store's containers/")
    }
}
