import Glibc
import SystemPackage

// MARK: - Extended attributes
//
// `user.*`, `trusted.*` and `security.*` pass through to the backing item. `system.*`
// (POSIX ACLs) is refused with EOPNOTSUPP: the kernel enforces only mode bits on this mount
// (default_permissions), so an ACL stored on the backing file would be a silent lie.

extension Volume {
    static func isSupportedName(_ name: UnsafePointer<CChar>) -> Bool {
        strncmp(name, "system.", 7) != 0
    }

    static func isCapabilityName(_ name: UnsafePointer<CChar>) -> Bool {
        strcmp(name, "security.capability") == 0
    }

    /// The value of `name`, into `buffer` (size 0: just the size). ENODATA when absent.
    public func extendedAttribute(_ item: Item, _ name: UnsafePointer<CChar>, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        if item.isVirtual || !Volume.isSupportedName(name) { throw .noData }
        let capability = Volume.isCapabilityName(name)
        let generation = item.state.withLock { $0.attributeGeneration }
        if capability && item.state.withLock({ $0.knownWithoutCapability }) { throw .noData }
        do {
            return try Syscall.getxattr(pathDescriptor: item.fd, name, buffer)
        } catch .noData where capability {
            // Remembered only if nothing changed the attributes while we asked.
            item.state.withLock { if $0.attributeGeneration == generation { $0.knownWithoutCapability = true } }
            throw .noData
        }
    }

    /// Drops what the volume remembers about an item's attributes (it changed in the store).
    public func forgetCachedAttributes(_ inode: UInt64) {
        if let item = items.item(inode) { forgetCachedAttributes(item) }
    }

    func forgetCachedAttributes(_ item: Item) {
        item.state.withLock {
            $0.knownWithoutCapability = false
            $0.attributeGeneration &+= 1
        }
    }

    /// The NUL-separated names, into `buffer` (size 0: just the size).
    public func extendedAttributeNames(_ item: Item, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        if item.isVirtual { return 0 }
        return try Syscall.listxattr(pathDescriptor: item.fd, buffer)
    }

    public func setExtendedAttribute(_ item: Item, _ name: UnsafePointer<CChar>, _ value: UnsafeRawBufferPointer, flags: CInt) throws(Errno) {
        try changeExtendedAttribute(item, name) { () throws(Errno) in try Syscall.setxattr(pathDescriptor: item.fd, name, value, flags) }
    }

    public func removeExtendedAttribute(_ item: Item, _ name: UnsafePointer<CChar>) throws(Errno) {
        try changeExtendedAttribute(item, name) { () throws(Errno) in try Syscall.removexattr(pathDescriptor: item.fd, name) }
    }

    /// Setting and removing alike: a modification (refused where the zone forbids one), of a
    /// supported name, forgetting the cached `security.capability` answer before and after,
    /// counted as a change of the item under way (`Item.changesUnderWay`).
    private func changeExtendedAttribute(_ item: Item, _ name: UnsafePointer<CChar>, _ change: () throws(Errno) -> Void) throws(Errno) {
        if item.isVirtual { throw .permissionDenied }
        try zone(of: item).checkModify()
        guard Volume.isSupportedName(name) else { throw .notSupported }
        let security = strncmp(name, "security.", 9) == 0
        defer { if security { forgetCachedAttributes(item) } }
        if security { forgetCachedAttributes(item) }
        try item.changing { () throws(Errno) in try change() }
    }
}
