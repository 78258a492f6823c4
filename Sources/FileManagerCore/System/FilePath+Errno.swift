import SystemPackage

// swift-system's `withPlatformString` rethrows untyped errors; these forward a typed
// `Errno` so that `throws(Errno)` code stays typed (and allocation-free) end to end.

extension FilePath.Component {
    @inline(__always)
    public func withName<R>(_ body: (UnsafePointer<CChar>) throws(Errno) -> R) throws(Errno) -> R {
        let result: Result<R, Errno> = withPlatformString { p in
            do throws(Errno) { return .success(try body(p)) } catch { return .failure(error) }
        }
        return try result.get()
    }
}

extension FilePath {
    @inline(__always)
    public func withName<R>(_ body: (UnsafePointer<CChar>) throws(Errno) -> R) throws(Errno) -> R {
        let result: Result<R, Errno> = withPlatformString { p in
            do throws(Errno) { return .success(try body(p)) } catch { return .failure(error) }
        }
        return try result.get()
    }
}
