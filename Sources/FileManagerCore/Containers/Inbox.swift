import Glibc
import SystemPackage

extension ContainerRegistry {
    /// Copies the host file `source` into `containers/ID/Documents/Inbox/` (SPEC §1: the only
    /// way in) and returns its name there. The data, mode and times are copied; the file
    /// belongs to `caller` and is read with the caller's permissions, never the daemon's.
    /// The copy is made in `.staging/` and renamed in with `RENAME_NOREPLACE`, so nothing is
    /// overwritten and a crash never leaves a partial file in the Inbox; a taken name gets
    /// the next `CollisionNames` candidate. `progress` hears bytes copied and the total.
    public func deliver(_ source: FilePath, to id: BundleIdentifier, caller: Caller, hooks: StoreChangeHooks = .direct,
                        progress: (_ done: Int64, _ total: Int64) -> Void = { _, _ in }) throws(FileManagerError) -> FilePath.Component {
        try authorize(caller, id, to: "deliver into its Inbox")
        guard let baseName = source.lastComponent, source.string != "/" else { throw .invalidArgument("\(source): names no file") }
        let inbox = try openContainerDirectory(id, "Documents/Inbox")
        defer { Syscall.close(inbox) }
        let input: CInt
        do {
            input = try Credentials.withAccessChecks { () throws(Errno) -> CInt in
                try Credentials.asCaller(caller) { () throws(Errno) -> CInt in
                    try source.withName { p throws(Errno) in try Syscall.open(p, O_RDONLY | O_NOCTTY | O_NONBLOCK) }
                }
            }
        } catch {
            throw FileManagerError(error, path: source.string)
        }
        defer { Syscall.close(input) }
        let st: stat
        do { st = try Syscall.fstat(input) } catch { throw FileManagerError(error, path: source.string) }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            throw (st.st_mode & S_IFMT) == S_IFDIR ? .isADirectory("\(source) (only files can be delivered)")
                : .invalidArgument("\(source): not a regular file (only files can be delivered)")
        }

        let staged = stagingName("inbox")
        var published = false
        defer { if !published { _ = try? staged.withName { p throws(Errno) in try Syscall.unlinkat(store.stagingFD, p, 0) } } }
        do {
            let output = try Credentials.asCaller(caller) { () throws(Errno) -> CInt in
                try staged.withName { p throws(Errno) in try Syscall.openat(store.stagingFD, p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600) }
            }
            defer { Syscall.close(output) }
            try Self.copy(from: input, to: output, size: Int64(st.st_size), progress: progress)
            // Set-ID bits are not handed on: the copy belongs to the caller, not the file's owner.
            try Syscall.fchmod(pathDescriptor: output, st.st_mode & 0o1777)
            var times = (st.st_atim, st.st_mtim)
            try withUnsafePointer(to: &times) { p throws(Errno) in
                try Syscall.utimens(pathDescriptor: output, isSymlink: false, UnsafeRawPointer(p).assumingMemoryBound(to: timespec.self))
            }
            // Acknowledged means durable (SPEC §6).
            try Syscall.fsync(output, dataOnly: false)
        } catch {
            throw FileManagerError(error, path: source.string)
        }

        for n in 1...CollisionNames.limit {
            let name = CollisionNames.candidate(baseName, n)
            let path = FilePath("containers/\(id)/Documents/Inbox").appending(name)
            do {
                try hooks.changing(inbox, name, at: path) { () throws(Errno) in
                    try staged.withName { s throws(Errno) in
                        try name.withName { d throws(Errno) in try Syscall.renameat2(store.stagingFD, s, inbox, d, RENAME_NOREPLACE) }
                    }
                }
                published = true
                store.syncDirectory(inbox)
                hooks.announce(path, true)
                return name
            } catch .fileExists {
                continue
            } catch {
                throw FileManagerError(error, path: path.string)
            }
        }
        throw .itemExists("containers/\(id)/Documents/Inbox/\(baseName): \(CollisionNames.limit) names taken")
    }

    /// The data, in pieces of 8 MiB so that `progress` can be told.
    static func copy(from input: CInt, to output: CInt, size: Int64, progress: (Int64, Int64) -> Void) throws(Errno) {
        var inOff: off_t = 0, outOff: off_t = 0
        let piece = 8 << 20
        progress(0, size)
        while true {
            let n: Int
            do {
                n = try Syscall.copyFileRange(input, &inOff, output, &outOff, piece, 0)
            } catch .improperLink, .invalidArgument, .notSupported, .noFunction {
                n = try copyByReading(from: input, to: output, at: inOff, count: piece)
                inOff += off_t(n)
                outOff += off_t(n)
            }
            if n == 0 { break }  // the end (the file may have grown or shrunk meanwhile)
            progress(Int64(outOff), max(size, Int64(outOff)))
        }
    }

    private static func copyByReading(from input: CInt, to output: CInt, at offset: off_t, count: Int) throws(Errno) -> Int {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        var total = 0
        while total < count {
            let n = try Syscall.pread(input, buffer, offset + off_t(total))
            if n == 0 { break }
            var done = 0
            while done < n {
                done += try Syscall.pwrite(output, UnsafeRawBufferPointer(rebasing: buffer[done..<n]), offset + off_t(total + done))
            }
            total += n
        }
        return total
    }
}
