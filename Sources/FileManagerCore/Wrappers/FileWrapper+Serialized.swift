import Glibc
import SystemPackage

/// NSFileWrapper's `serializedRepresentation` and `init(serializedRepresentation:)`: the
/// wrapper as a pax archive, written and read by the snapshot archive code (docs/DESIGN.md
/// 53, 54), so that one format and one set of refusals serve both. The tree passes through
/// a private directory under `$TMPDIR` (or /tmp), removed before the call returns.
extension FileWrapper {
    /// The wrapper as a pax archive whose members start with its preferred name (or
    /// `wrapper`), as `snapshot export` writes a snapshot: modification times in whole
    /// seconds where a member needs no pax header.
    public func serializedRepresentation() throws(FileManagerError) -> [UInt8] {
        try Self.inScratch { scratch throws(FileManagerError) in
            var top = preferredFilename ?? "wrapper"
            if (try? Snapshots.validate(name: top)) == nil { top = "wrapper" }
            _ = try writeInPlace(to: scratch, name: Array(top.utf8))
            let output = try Self.anonymousFile(scratch)
            defer { Syscall.close(output) }
            try SnapshotArchive.export(scratch, top, to: output, display: "serialized representation")
            return try Self.readAll(output)
        }
    }

    /// Reads a wrapper back from `serializedRepresentation`'s bytes, its data in memory.
    /// An archive `snapshot import` would refuse is refused, with the same reasons.
    public convenience init(serializedRepresentation bytes: [UInt8]) throws(FileManagerError) {
        let read = try Self.inScratch { scratch throws(FileManagerError) -> FileWrapper in
            let input = try Self.anonymousFile(scratch)
            defer { Syscall.close(input) }
            do throws(Errno) {
                var done = 0
                try bytes.withBytes { b throws(Errno) in
                    while done < b.count { done += try Syscall.pwrite(input, UnsafeRawBufferPointer(rebasing: b[done...]), off_t(done)) }
                }
            } catch {
                throw FileManagerError(error, path: "serialized representation")
            }
            let extracted = try SnapshotArchive.extract(input, into: scratch, Array("x".utf8), label: "serialized representation",
                                                        ownership: SnapshotArchive.Ownership(caller: .current))
            guard let top = extracted.top else { throw .invalidArgument("serialized representation: no members") }
            let dir: CInt
            do throws(Errno) { dir = try Syscall.openat(scratch, "x", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) } catch {
                throw FileManagerError(error, path: "serialized representation")
            }
            defer { Syscall.close(dir) }
            return try FileWrapper(directory: dir, name: top, options: ReadingOptions(immediate: true))
        }
        self.init(contents: read.contents, attributes: read.fileAttributes, name: Array((read.filename ?? "wrapper").utf8))
    }

    /// Runs `body` with a new private directory, removed afterwards.
    private static func inScratch<R>(_ body: (CInt) throws(FileManagerError) -> R) throws(FileManagerError) -> R {
        let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array((base + "/cfs-wrapper.XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw FileManagerError(Errno(rawValue: errno), path: base)
        }
        let path = String(cString: made)
        let fd: CInt
        do throws(Errno) { fd = try Syscall.open(path, O_PATH | O_DIRECTORY | O_CLOEXEC) } catch {
            _ = rmdir(path)
            throw FileManagerError(error, path: path)
        }
        defer {
            try? TreeRemoval.removeContents(of: fd)
            Syscall.close(fd)
            _ = rmdir(path)
        }
        return try body(fd)
    }

    /// A file with no name in `dir`, for reading and writing.
    private static func anonymousFile(_ dir: CInt) throws(FileManagerError) -> CInt {
        do throws(Errno) { return try Syscall.openat(dir, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0o600) } catch {
            throw FileManagerError(error, path: "serialized representation")
        }
    }

    private static func readAll(_ fd: CInt) throws(FileManagerError) -> [UInt8] {
        var result: [UInt8] = []
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let n: Int
            do throws(Errno) { n = try Syscall.pread(fd, buffer, off_t(result.count)) } catch {
                throw FileManagerError(error, path: "serialized representation")
            }
            if n == 0 { return result }
            result.append(contentsOf: buffer[0..<n])
        }
    }
}
