import CFuse

// MARK: - Versions, for `containerfs --version` and `status`

extension FUSEBridge {
    /// The libfuse the binary runs with (`fuse_pkgversion`), e.g. "3.14.0".
    public static var libfuseVersion: String { String(cString: fuse_pkgversion()) }

    /// The kernel's FUSE protocol version, as it announced it at INIT; nil before INIT.
    /// (Major 7 is the only one there has been; the minor says which features exist.)
    public var kernelProtocol: String? {
        let minor = kernelMinor.load(ordering: .acquiring)
        return minor == 0 ? nil : "7.\(minor)"
    }
}
