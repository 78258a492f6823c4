import ArgumentParser
import FileManagerCore
import Foundation
import SystemPackage

/// `containerfs container create|list|remove|path`.
struct ContainerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "container",
        abstract: "Create, list, remove and locate app containers.",
        subcommands: [Create.self, List.self, Remove.self, Path.self]
    )

    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a container with the standard layout.")
        @OptionGroup var store: StoreOption
        @Argument(help: "Bundle identifier (reverse-DNS), e.g. com.example.notes.") var id: String
        @Option(help: "A directory whose contents become the read-only bundle.") var bundle: String?

        func run() throws {
            try failing {
                let id = try identifierArgument(id)
                let bundlePath = bundle.map { Paths.absolute($0) }
                if let bundlePath, !Paths.isDirectory(bundlePath) { throw CommandFailure("\(bundlePath): bundle is not a directory") }
                switch try store.access(creating: true) {
                case .daemon(let client):
                    var args = ["id": id.rawValue]
                    if let bundlePath { args["bundle"] = bundlePath.string }
                    let r = try client.call("container.create", args).checked()
                    r.warnings?.forEach(Self.warn)
                    FileHandleOutput.standardOutput("\(r.result?["path"] ?? id.rawValue)\n")
                case .direct(let opened, let lock):
                    try ContainerRegistry(store: opened).create(id, caller: .current, bundleSource: bundlePath, warning: Self.warn)
                    withExtendedLifetime(lock) {}
                    FileHandleOutput.standardOutput("\(opened.path.appending("containers/\(id)"))\n")
                }
            }
        }

        /// What the copy left out of the bundle (docs/SEMANTICS.md §4's rule for snapshots: FIFOs,
        /// sockets and devices are skipped with a warning); the command still succeeds.
        static func warn(_ message: String) {
            FileHandleOutput.standardError("containerfs: warning: \(message)\n")
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List containers.")
        @OptionGroup var store: StoreOption
        @Flag(help: "One JSON array.") var json = false

        func run() throws {
            try failing {
                let items: [[String: String]]
                switch try store.access(exclusive: false) {
                case .daemon(let client): items = try client.call("container.list").checked().items ?? []
                case .direct(let opened, _): items = ContainerRegistry(store: opened).list().map(ContainerListing.dictionary)
                }
                if json {
                    try JSONListing.print(items, numbers: ["ownerUID"])
                } else {
                    for row in items {
                        FileHandleOutput.standardOutput("\(row["id"] ?? "")\t\(row["displayName"] ?? "")\tuid \(row["ownerUID"] ?? "")\t\(row["created"] ?? "")\n")
                    }
                }
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Move a container to the trash, as one item (--permanently: delete it).",
            discussion: "Prints where the container went; `containerfs trash restore NAME` brings it back. Refused while a program started by `containerfs run` for it is alive, unless --force.")
        @OptionGroup var store: StoreOption
        @Argument(help: "Bundle identifier.") var id: String
        @Flag(help: "Delete at once instead of moving to the trash.") var permanently = false
        @Flag(help: "Also while a program started by `containerfs run` for it is alive.") var force = false

        func run() throws {
            try failing {
                let id = try identifierArgument(id)
                switch try store.access() {
                case .daemon(let client):
                    var args = ["id": id.rawValue]
                    if permanently { args["permanently"] = "1" }
                    if force { args["force"] = "1" }
                    let r = try client.call("container.remove", args).checked()
                    if let path = r.result?["path"] { FileHandleOutput.standardOutput("\(path)\n") }
                case .direct(let opened, let lock):
                    let registry = ContainerRegistry(store: opened)
                    if let path = try registry.remove(id, permanently: permanently, force: force, caller: .current,
                                                      trash: TrashCan(items: TrashPlace(store: opened), store: opened, uid: getuid())) {
                        FileHandleOutput.standardOutput("\(path)\n")
                    }
                    withExtendedLifetime(lock) {}
                }
            }
        }
    }

    struct Path: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a container directory under the live mount (like URLsForDirectory).",
            discussion: "item-replacement makes a fresh private directory in the container (of --for's item, when given) and prints it.")
        @OptionGroup var store: StoreOption
        @Argument(help: "Bundle identifier.") var id: String
        @Option(help: "home, bundle, documents, inbox, library, application-support, caches, preferences, tmp, item-replacement.")
        var directory: String = "home"
        @Option(name: .customLong("for"), help: "With item-replacement: the item to be replaced (a path under the mount).")
        var item: String?

        static let relative: [String: String?] = [
            "home": nil, "documents": "Documents", "inbox": "Documents/Inbox", "library": "Library",
            "application-support": "Library/Application Support", "caches": "Library/Caches",
            "preferences": "Library/Preferences", "tmp": "tmp",
        ]

        func validate() throws {
            guard directory == "bundle" || directory == "item-replacement" || Self.relative[directory] != nil else {
                throw ValidationError("unknown directory '\(directory)' (home, bundle, documents, inbox, library, application-support, caches, preferences, tmp, item-replacement)")
            }
            if item != nil && directory != "item-replacement" { throw ValidationError("--for goes with --directory item-replacement") }
        }

        func run() throws {
            try failing {
                var id = try identifierArgument(id)
                if directory == "item-replacement" {
                    let client: ControlClient
                    if let item {
                        let target = try MountPath(item)
                        id = try Self.container(of: target)
                        client = try target.connect()
                    } else {
                        guard case .daemon(let c) = try store.access(exclusive: false) else {
                            throw CommandFailure("\(store.path): no live mount of this store (paths are answered under the mount)")
                        }
                        client = c
                    }
                    let r = try client.call("container.itemReplacement", ["id": id.rawValue]).checked()
                    FileHandleOutput.standardOutput("\(r.result?["path"] ?? "")\n")
                    return
                }
                guard case .daemon(let client) = try store.access(exclusive: false) else {
                    throw CommandFailure("\(store.path): no live mount of this store (paths are answered under the mount)")
                }
                let status = try client.call("status").checked()
                _ = try client.call("container.list").checked().items?.first { $0["id"] == id.rawValue }
                    ?? { throw FileManagerError.noSuchItem("containers/\(id)") }()
                var path = FilePath(status.result?["mountPoint"] ?? "/").appending("containers/\(id)")
                if directory == "bundle" {
                    path.append(id.bundleDirectoryName)
                } else if let rel = Self.relative[directory], let rel {
                    path.append(rel)
                }
                FileHandleOutput.standardOutput("\(path)\n")
            }
        }

        /// The container holding the item to be replaced: a snapshot cannot be replaced
        /// into (EROFS), and an item outside every container has no container's volume.
        static func container(of target: MountPath) throws -> BundleIdentifier {
            let components = target.relative.components.map(\.string)
            if components.first == "snapshots" {
                throw CommandFailure("\(target.absolute): \(Errno.readOnlyFileSystem) (snapshots never change; no item in them can be replaced)")
            }
            guard components.count >= 2, components[0] == "containers", let id = BundleIdentifier(components[1]) else {
                throw CommandFailure("\(target.absolute): not inside a container (an item replacement directory is made in the container of the item to replace)")
            }
            return id
        }
    }
}

/// `--store PATH` and how to reach it: through a live daemon's control socket, or directly
/// under the store lock when no daemon serves it (docs/SEMANTICS.md §2).
struct StoreOption: ParsableArguments {
    @Option(name: .customLong("store"), help: "The store (default ~/.local/share/containerfs).")
    var storePath: String?

    /// `--store`, else `CONTAINERFS_STORE`, else the default store.
    var path: FilePath {
        if let storePath { return Paths.absolute(storePath) }
        if let env = getenv("CONTAINERFS_STORE"), env.pointee != 0 { return Paths.absolute(String(cString: env)) }
        return Store.defaultPath
    }

    /// `--store ""` used to name the working directory, which then became a store.
    func validate() throws {
        if storePath?.isEmpty == true { throw ValidationError("--store: an empty path names no store") }
    }

    enum Access {
        case daemon(ControlClient)
        case direct(Store, StoreLock?)
    }

    /// The store, through its daemon or directly. Only `creating` (`container create`) may
    /// make it, in a missing or empty directory (DESIGN.md 37).
    func access(exclusive: Bool = true, creating: Bool = false) throws -> Access {
        sayWhichStoreIfAmbiguous()
        return try Self.access(path, exclusive: exclusive, creating: creating)
    }

    /// With neither `--store` nor `CONTAINERFS_STORE` and more than one live mount, the
    /// default store may not be the one meant: say which is used.
    func sayWhichStoreIfAmbiguous() {
        guard storePath == nil, getenv("CONTAINERFS_STORE") == nil else { return }
        let mounts = MountTable.entries()
        guard mounts.count > 1 else { return }
        FileHandleOutput.standardError("containerfs: using the store \(path) (\(mounts.count) ContainerFS mounts are live, of \(mounts.map(\.source).joined(separator: ", ")); --store or CONTAINERFS_STORE picks another)\n")
    }

    static func access(_ path: FilePath, exclusive: Bool = true, creating: Bool = false) throws -> Access {
        if creating { try StoreLocation.requireStoreOrRoom(path) } else { try StoreLocation.requireStore(path) }
        if let client = ControlClient(path: Paths.controlSocket(path)) { return .daemon(client) }
        let opened = try Store(at: path, create: creating)
        if let holder = opened.lockHolder() {
            throw CommandFailure("\(path): store is in use (\(holder)) but its daemon does not answer")
        }
        guard exclusive else { return .direct(opened, nil) }
        let lock = try opened.acquireLock(mountPoint: nil)
        opened.settleJournal()
        return .direct(opened, lock)
    }
}

extension ControlResponse {
    /// The response, or a failure carrying the daemon's message.
    func checked() throws -> ControlResponse {
        guard ok else { throw CommandFailure(error ?? "the daemon refused (errno \(errno ?? 0))") }
        return self
    }
}
