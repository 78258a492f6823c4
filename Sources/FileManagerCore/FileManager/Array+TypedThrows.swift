import SystemPackage

// `Array.withUnsafeBytes` and its mutable sibling rethrow untyped errors; these keep a
// typed `Errno` typed, as `FilePath.withName` does for names (System/FilePath+Errno.swift).

extension Array where Element == UInt8 {
    @inline(__always)
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws(Errno) -> R) throws(Errno) -> R {
        let result: Result<R, Errno> = withUnsafeBytes { b in Result { () throws(Errno) in try body(b) } }
        return try result.get()
    }

    @inline(__always)
    mutating func withMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws(Errno) -> R) throws(Errno) -> R {
        let result: Result<R, Errno> = withUnsafeMutableBytes { b in Result { () throws(Errno) in try body(b) } }
        return try result.get()
    }
}
