import Glibc
import SystemPackage

/// The standard directories of a container (docs/SEMANTICS.md §1). They can never be removed or
/// renamed; what may happen *inside* them is the zone's business.
public enum LayoutDirectory: String, Sendable, CaseIterable {
    case bundle, documents, inbox, library, applicationSupport, caches, preferences, tmp

    /// Paths relative to the container root, parents first (creation order).
    public static func relativePaths(bundleName: String) -> [(LayoutDirectory, String)] {
        [(.bundle, bundleName), (.documents, "Documents"), (.inbox, "Documents/Inbox"),
         (.library, "Library"), (.applicationSupport, "Library/Application Support"),
         (.caches, "Library/Caches"), (.preferences, "Library/Preferences"), (.tmp, "tmp")]
    }
}

/// Which part of the mounted tree an item lives in. Every policy decision (EROFS, EACCES,
/// EXDEV) is a function of zones, computed once when an item is looked up, so that the hot
/// path (read, write, getattr) never evaluates policy at all.
///
/// A container is identified by the inode number of its root directory (`ContainerKey`):
/// stable across renames and remounts, and free of allocation.
public enum Zone: Sendable, Equatable {
    public typealias ContainerKey = UInt64

    /// The virtual mount root.
    case root
    /// `containers/`: lists containers; `mkdir` here creates one.
    case containers
    /// A container's root directory.
    case container(ContainerKey)
    /// One of the standard directories itself.
    case layout(ContainerKey, LayoutDirectory)
    /// Anything else in a container, outside the bundle and Inbox: plain POSIX.
    case contents(ContainerKey)
    /// Inside the bundle: read-only.
    case bundle(ContainerKey)
    /// Inside `Documents/Inbox`: read, list, delete, rename out.
    case inbox(ContainerKey)
    /// `snapshots/` and everything below it: read-only.
    case snapshots
    /// `.Trash-UID/` and everything below it: plain POSIX, one volume with every container.
    case trash

    /// The zone of a child called `name` of an item in this zone.
    public func child(named name: UnsafePointer<CChar>, isDirectory: Bool, key: UInt64) -> Zone {
        switch self {
        case .root:
            if strcmp(name, "containers") == 0 { return .containers }
            if strcmp(name, "snapshots") == 0 { return .snapshots }
            return .trash
        case .containers:
            return .container(key)
        case .container(let c):
            guard isDirectory else { return .contents(c) }
            if strcmp(name, "Documents") == 0 { return .layout(c, .documents) }
            if strcmp(name, "Library") == 0 { return .layout(c, .library) }
            if strcmp(name, "tmp") == 0 { return .layout(c, .tmp) }
            if Zone.isBundleName(name) { return .layout(c, .bundle) }
            return .contents(c)
        case .layout(let c, .documents):
            return isDirectory && strcmp(name, "Inbox") == 0 ? .layout(c, .inbox) : .contents(c)
        case .layout(let c, .library):
            if isDirectory {
                if strcmp(name, "Application Support") == 0 { return .layout(c, .applicationSupport) }
                if strcmp(name, "Caches") == 0 { return .layout(c, .caches) }
                if strcmp(name, "Preferences") == 0 { return .layout(c, .preferences) }
            }
            return .contents(c)
        case .layout(let c, .bundle), .bundle(let c): return .bundle(c)
        case .layout(let c, .inbox), .inbox(let c): return .inbox(c)
        case .layout(let c, _), .contents(let c): return .contents(c)
        case .snapshots: return .snapshots
        case .trash: return .trash
        }
    }

    /// A directory at a container root whose name ends in `.app` is the bundle; only the CLI
    /// installs one (creating such a name through the mount is refused).
    static func isBundleName(_ name: UnsafePointer<CChar>) -> Bool {
        let n = strlen(name)
        return n > 4 && strcmp(name + n - 4, ".app") == 0
    }

    /// The volume an item belongs to, for EXDEV: each container is its own; the trash shares
    /// one with every container (docs/SEMANTICS.md §1: renames into and out of the trash always work).
    var container: ContainerKey? {
        switch self {
        case .container(let c), .layout(let c, _), .contents(let c), .bundle(let c), .inbox(let c): return c
        default: return nil
        }
    }

    public var isReadOnly: Bool {
        switch self {
        case .bundle, .layout(_, .bundle), .snapshots: return true
        default: return false
        }
    }

    var isInbox: Bool {
        switch self {
        case .inbox, .layout(_, .inbox): return true
        default: return false
        }
    }

    /// Whether the child `name` of this directory can be in a zone other than ordinary
    /// contents (a standard directory, a container, the bundle): only then do removal and
    /// rename need to look at the child before acting.
    func mayHaveSpecialChild(named name: UnsafePointer<CChar>) -> Bool {
        switch self {
        case .contents, .trash, .inbox, .bundle, .snapshots, .layout(_, .bundle): return false
        case .container, .layout(_, .documents), .layout(_, .library):
            // Only a standard directory's own name (or a bundle's) can be special here.
            if case .contents = child(named: name, isDirectory: true, key: 0) { return false }
            return true
        case .layout: return false
        default: return true
        }
    }

    /// Whether this item itself may never be removed or renamed through the mount.
    var isFixed: Bool {
        switch self {
        case .root, .containers, .snapshots, .container, .layout: return true
        default: return false
        }
    }
}

// MARK: - Policy

/// The per-area rules of docs/SEMANTICS.md §1, enforced by the daemon for every caller, root included.
/// Each check throws the errno the caller must see; read-only zones answer EROFS before
/// anything else (docs/SEMANTICS.md §3: "Snapshot paths answer EROFS before any waiting").
extension Zone {
    /// Changing this item's data or metadata (open for writing, truncate, chmod, chown,
    /// utimens, xattr changes).
    public func checkModify() throws(Errno) {
        if isReadOnly { throw .readOnlyFileSystem }
        switch self {
        case .root, .containers: throw .permissionDenied
        case .inbox, .layout(_, .inbox): throw .permissionDenied
        default: return
        }
    }

    /// Creating an entry called `name` in this directory (create, mknod, mkdir, symlink,
    /// link target). `.root` and `.containers` are handled by their callers (trash, containers).
    public func checkCreate(_ name: UnsafePointer<CChar>) throws(Errno) {
        if isReadOnly { throw .readOnlyFileSystem }
        switch self {
        case .root, .containers: throw .permissionDenied
        case .inbox, .layout(_, .inbox): throw .permissionDenied
        case .container: if Zone.isBundleName(name) { throw .permissionDenied }
        default: return
        }
    }

    /// Removing `child` (unlink, rmdir) from this directory.
    public func checkRemove(child: Zone) throws(Errno) {
        // Why a fixed child answers before a read-only one: docs/SEMANTICS.md §1 names `NAME.app` among
        // the standard directories that "cannot be removed or renamed: EACCES"; removing
        // it changes the container root (writable), not the bundle's contents (EROFS).
        if isReadOnly { throw .readOnlyFileSystem }
        if child.isFixed { throw .permissionDenied }
        if child.isReadOnly { throw .readOnlyFileSystem }
        if case .root = self { throw .permissionDenied }
    }

    /// Renaming `item` (in `self`) to a name in `destination`, possibly replacing `replaced`.
    /// `exchange` makes both sides move (RENAME_EXCHANGE).
    public static func checkRename(item: Zone, from source: Zone, to destination: Zone,
                                   replacing replaced: Zone?, newName: UnsafePointer<CChar>,
                                   exchange: Bool) throws(Errno) {
        if source.isReadOnly || destination.isReadOnly { throw .readOnlyFileSystem }
        // A standard directory (the bundle directory included) is EACCES before its own
        // read-only zone is EROFS: see `checkRemove`.
        if item.isFixed || (replaced?.isFixed ?? false) { throw .permissionDenied }
        if item.isReadOnly || (replaced?.isReadOnly ?? false) { throw .readOnlyFileSystem }
        // Into or within Inbox: refused; out of it: allowed. An exchange moves both ways.
        if destination.isInbox || (exchange && source.isInbox) { throw .permissionDenied }
        switch destination {
        case .root, .containers: throw .permissionDenied
        case .container: if Zone.isBundleName(newName) { throw .permissionDenied }
        default: break
        }
        switch source {
        case .root, .containers: throw .permissionDenied
        default: break
        }
        if let a = source.container, let b = destination.container, a != b { throw .improperLink }
    }

    /// Hard-linking `item` into `destination` as `name`.
    public static func checkLink(item: Zone, into destination: Zone, name: UnsafePointer<CChar>) throws(Errno) {
        if case .snapshots = item, destination != .snapshots { throw .improperLink }
        if item.isReadOnly || destination.isReadOnly { throw .readOnlyFileSystem }
        if item.isInbox { throw .permissionDenied }
        try destination.checkCreate(name)
        if item.container != destination.container { throw .improperLink }
    }
}
