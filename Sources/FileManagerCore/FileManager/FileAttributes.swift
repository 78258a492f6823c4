import CLinux
import Glibc
import SystemPackage

/// What `attributesOfItem(atPath:)` reports: NSFileManager's attribute dictionary as typed
/// fields (docs/SEMANTICS.md §8.9). Describes the item itself, never a link's target.
public struct FileAttributes: Sendable, Equatable {
    /// `NSFileType` (docs/SEMANTICS.md §8.9). A FIFO, having no constant of its own, is `.unknown`.
    public enum FileType: Sendable, Equatable {
        case directory, regular, symbolicLink, socket, characterSpecial, blockSpecial, unknown

        /// The type of an `st_mode`.
        public init(mode: mode_t) {
            switch mode & S_IFMT {
            case S_IFDIR: self = .directory
            case S_IFREG: self = .regular
            case S_IFLNK: self = .symbolicLink
            case S_IFSOCK: self = .socket
            case S_IFCHR: self = .characterSpecial
            case S_IFBLK: self = .blockSpecial
            default: self = .unknown
            }
        }
    }

    /// `NSFileType`.
    public var type: FileType
    /// `NSFileSize`: `st_size` (a symlink's is the length of its target).
    public var size: UInt64
    /// `NSFileModificationDate`: `st_mtim`.
    public var modificationDate: FileTimestamp
    /// `NSFileCreationDate`: `user.containerfs.creation-date` if set (by `setAttributes` or
    /// `replaceItem`), else the birth time `statx` reports; nil where neither exists.
    public var creationDate: FileTimestamp?
    /// `NSFilePosixPermissions`: `st_mode & 0o7777` (setuid, setgid and sticky included).
    public var posixPermissions: mode_t
    /// `NSFileOwnerAccountID`.
    public var ownerAccountID: uid_t
    /// `NSFileGroupOwnerAccountID`.
    public var groupOwnerAccountID: gid_t
    /// `NSFileOwnerAccountName`, nil for a uid the system does not know (an invented name
    /// could collide with a real one).
    public var ownerAccountName: String?
    /// `NSFileGroupOwnerAccountName`, nil for an unknown gid.
    public var groupOwnerAccountName: String?
    /// `NSFileReferenceCount`: the number of hard links (`st_nlink`).
    public var referenceCount: UInt64
    /// `NSFileSystemFileNumber`: `st_ino`.
    public var systemFileNumber: UInt64
    /// `NSFileSystemNumber`: `st_dev`.
    public var systemNumber: UInt64
    /// `NSFileDeviceIdentifier`: `st_rdev`, the device a special file stands for.
    public var deviceIdentifier: UInt64
    /// `NSFileExtensionHidden`: the xattr `user.containerfs.extension-hidden` is `1`.
    public var extensionHidden: Bool

    /// Builds the stat-derived fields; the creation date and the xattr flag come separately.
    init(_ st: stat, creationDate: FileTimestamp?, extensionHidden: Bool) {
        type = FileType(mode: st.st_mode)
        size = UInt64(max(0, st.st_size))
        modificationDate = FileTimestamp(st.st_mtim)
        self.creationDate = creationDate
        posixPermissions = st.st_mode & 0o7777
        ownerAccountID = st.st_uid
        groupOwnerAccountID = st.st_gid
        ownerAccountName = AccountNames.userName(st.st_uid)
        groupOwnerAccountName = AccountNames.groupName(st.st_gid)
        referenceCount = UInt64(st.st_nlink)
        systemFileNumber = UInt64(st.st_ino)
        systemNumber = UInt64(st.st_dev)
        deviceIdentifier = UInt64(st.st_rdev)
        self.extensionHidden = extensionHidden
    }
}

/// The settable subset of the attribute keys (docs/SEMANTICS.md §8.8), for
/// `setAttributes(_:ofItemAtPath:)`, `createDirectory(…attributes:)` and `createFile(…)`.
/// A nil field is left alone. Built from a `FileAttributes` it carries the settable fields
/// of that item, so attributes read from one item can be passed back or onto another.
public struct FileAttributeChanges: Sendable, Equatable {
    public var posixPermissions: mode_t?
    public var ownerAccountID: uid_t?
    public var groupOwnerAccountID: gid_t?
    public var modificationDate: FileTimestamp?
    /// Kept in `user.containerfs.creation-date` (Linux cannot set a birth time).
    public var creationDate: FileTimestamp?
    /// Kept in `user.containerfs.extension-hidden`.
    public var extensionHidden: Bool?

    public init(posixPermissions: mode_t? = nil, ownerAccountID: uid_t? = nil, groupOwnerAccountID: gid_t? = nil,
                modificationDate: FileTimestamp? = nil, creationDate: FileTimestamp? = nil, extensionHidden: Bool? = nil) {
        self.posixPermissions = posixPermissions
        self.ownerAccountID = ownerAccountID
        self.groupOwnerAccountID = groupOwnerAccountID
        self.modificationDate = modificationDate
        self.creationDate = creationDate
        self.extensionHidden = extensionHidden
    }

    /// The settable fields of `attributes`; the read-only ones (size, type, numbers) are dropped.
    public init(_ attributes: FileAttributes) {
        self.init(posixPermissions: attributes.posixPermissions, ownerAccountID: attributes.ownerAccountID,
                  groupOwnerAccountID: attributes.groupOwnerAccountID, modificationDate: attributes.modificationDate,
                  creationDate: attributes.creationDate, extensionHidden: attributes.extensionHidden)
    }

    /// Whether nothing would change.
    public var isEmpty: Bool { self == FileAttributeChanges() }
}

/// What `attributesOfFileSystem(forPath:)` reports (docs/SEMANTICS.md §8.9).
public struct FileSystemAttributes: Sendable, Equatable {
    /// `NSFileSystemSize`: `f_blocks × f_frsize`.
    public var size: UInt64
    /// `NSFileSystemFreeSize`: `f_bavail × f_frsize`, what an unprivileged writer can use.
    public var freeSize: UInt64
    /// `NSFileSystemNodes`: `f_files`.
    public var nodes: UInt64
    /// `NSFileSystemFreeNodes`: `f_ffree`.
    public var freeNodes: UInt64
    /// `NSFileSystemNumber`: `st_dev` of the path.
    public var systemNumber: UInt64
}

/// The xattrs that carry attribute keys Linux has no field for.
enum AttributeXattr {
    static let creationDate = "user.containerfs.creation-date"
    static let extensionHidden = "user.containerfs.extension-hidden"
    static let package = "user.containerfs.package"

    /// The value of `name` on the item behind `fd` as text; nil if absent or unreadable.
    static func text(_ fd: CInt, _ name: String) -> String? {
        guard let bytes = ExtendedAttributes.value(fd, Array(name.utf8CString)) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func set(_ fd: CInt, _ name: String, _ text: String) throws(Errno) {
        try Array(text.utf8).withBytes { b throws(Errno) in
            try Syscall.setxattr(pathDescriptor: fd, name, b, 0)
        }
    }

    static func remove(_ fd: CInt, _ name: String) throws(Errno) {
        do { try Syscall.removexattr(pathDescriptor: fd, name) } catch .noData {}
    }

    /// The creation date of the item behind `fd`: the xattr, else the birth time.
    static func creationDate(_ fd: CInt) -> FileTimestamp? {
        if let text = text(fd, creationDate), let date = FileTimestamp(text) { return date }
        guard let born = try? Syscall.birthTime(fd, "", clinux_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) else { return nil }
        return FileTimestamp(born)
    }
}

/// uid and gid to names through the system's user and group databases (NSS).
enum AccountNames {
    static func userName(_ uid: uid_t) -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name else { return nil }
        return String(cString: name)
    }

    static func groupName(_ gid: gid_t) -> String? {
        var entry = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getgrgid_r(gid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.gr_name else { return nil }
        return String(cString: name)
    }
}
