import Dispatch
import Glibc
import Synchronization
import SystemPackage

// MARK: - The synchronous API (docs/SEMANTICS.md §3.5)

extension FileCoordinator {
    /// Reads the item at `url` once no conflicting access runs and its presenters have
    /// relinquished it (and saved, unless `.withoutChanges`). The accessor gets the path to
    /// use (after a move while waiting, or `.resolvesSymbolicLink`, it differs from `url`).
    /// Throws without running the accessor when coordination fails; rethrows its errors.
    ///
    /// `.immediatelyAvailableMetadataOnly` takes no claim and asks nobody (docs/SEMANTICS.md §3.3);
    /// `.forUploading` copies the item under the claim, releases it, and hands the accessor
    /// the copy, removed when it returns.
    // `@_disfavoredOverload` (an underscored attribute, used on purpose): every blocking
    // form has an `async` twin with the same name, and Swift would otherwise pick the
    // blocking one for a synchronous closure even inside `async` code, parking a
    // cooperative thread for the whole wait. Disfavoured, it is chosen only where the
    // `async` form cannot be called: in synchronous code.
    @_disfavoredOverload
    public func coordinate<R>(readingItemAt url: FilePath, options: ReadingOptions = [],
                              byAccessor reader: (FilePath) throws -> R) throws -> R {
        try checkNesting(.read, paths: [url])
        if options.contains(.immediatelyAvailableMetadataOnly) {
            let path = url.coordinationNormalized
            return try withFrame(.read, paths: [path], asked: [:]) { try reader(path) }.0.get()
        }
        let intent = FileAccessIntent.readingIntent(with: url, options: options)
        if options.contains(.forUploading) { return try coordinateForUploading(intent, reader) }
        return try perform(.read, intents: [intent]) { try reader($0[0]) }
    }

    /// Writes the item at `url` once no conflicting access runs and its presenters have
    /// made way (relinquish; save for `.forMerging`; accommodate deletion for
    /// `.forDeleting`/`.forReplacing`). A subtree option on a directory also waits for,
    /// and holds off, every access inside it (R4).
    @_disfavoredOverload
    public func coordinate<R>(writingItemAt url: FilePath, options: WritingOptions = [],
                              byAccessor writer: (FilePath) throws -> R) throws -> R {
        try checkNesting(.write, paths: [url])
        return try perform(.write, intents: [.writingIntent(with: url, options: options)]) { try writer($0[0]) }
    }

    /// Reads one item and writes another in one access: both claims are granted together
    /// (never one held while waiting for the other). The accessor may nest
    /// single-item calls.
    @_disfavoredOverload
    public func coordinate<R>(readingItemAt readingURL: FilePath, options readingOptions: ReadingOptions = [],
                              writingItemAt writingURL: FilePath, options writingOptions: WritingOptions = [],
                              byAccessor readerWriter: (FilePath, FilePath) throws -> R) throws -> R {
        try checkNesting(.compound, paths: [readingURL, writingURL])
        let intents: [FileAccessIntent] = [.readingIntent(with: readingURL, options: readingOptions),
                                           .writingIntent(with: writingURL, options: writingOptions)]
        return try perform(.compound, intents: intents) { try readerWriter($0[0], $0[1]) }
    }

    /// Writes two items in one access (a move: `.forMoving` on the source, `.forReplacing`
    /// on the destination, docs/SEMANTICS.md §3.6). Both claims are granted together .
    @_disfavoredOverload
    public func coordinate<R>(writingItemAt url1: FilePath, options options1: WritingOptions = [],
                              writingItemAt url2: FilePath, options options2: WritingOptions = [],
                              byAccessor writer: (FilePath, FilePath) throws -> R) throws -> R {
        try checkNesting(.compound, paths: [url1, url2])
        let intents: [FileAccessIntent] = [.writingIntent(with: url1, options: options1),
                                           .writingIntent(with: url2, options: options2)]
        return try perform(.compound, intents: intents) { try writer($0[0], $0[1]) }
    }

    // MARK: - Machinery shared by the blocking forms

    /// Waits for the access, runs `body` as a block of `kind`, announces, ends the access.
    func perform<R>(_ kind: Frame.Kind, intents: [FileAccessIntent], _ body: ([FilePath]) throws -> R) throws -> R {
        center.track(intents)
        defer { center.untrack(intents) }
        let (access, urls) = try waitForAccess(intents)
        let writes = intents.indices.filter { !intents[$0].isReading }
        let watched = !center.presenters.isEmpty
        let existed = watched ? writes.map { Self.exists(urls[$0]) } : []
        let (result, moved) = withFrame(kind, paths: urls, asked: access.askedSteps) { try body(urls) }
        if watched { announceWrites(writes.map { urls[$0] }, existed: existed, moved: moved) }
        if let presenter = filePresenter, let first = writes.first {
            center.presenters.bindIfUnbound(presenter, to: urls[first])
        }
        access.end()
        return try result.get()
    }

    /// The claims for `intents` at their current paths.
    func claims(for intents: [FileAccessIntent], at urls: [FilePath]) -> (claims: [Claim], paths: [FilePath]) {
        var claims: [Claim] = [], paths: [FilePath] = []
        for (intent, url) in zip(intents, urls) {
            switch intent.kind {
            case .reading(let options):
                let r = center.resolver.target(for: url, resolvingSymlink: options.contains(.resolvesSymbolicLink))
                claims.append(Claim(target: r.target, reading: options, path: r.path))
                paths.append(r.path)
            case .writing(let options):
                let r = center.resolver.target(for: url, resolvingSymlink: false)
                claims.append(Claim(target: r.target, writing: options, path: r.path))
                paths.append(r.path)
            }
        }
        return (claims, paths)
    }

    /// Blocks until the access to `intents` is granted and prepared. If an intent's item
    /// moved meanwhile (the claim was on its old path), the access is given up and retried
    /// at the new path, a few times at most.
    func waitForAccess(_ intents: [FileAccessIntent]) throws -> (CoordinatedAccess, [FilePath]) {
        var attempt = 0
        while true {
            let requested = intents.map(\.url)
            let (claims, paths) = claims(for: intents, at: requested)
            let access = try blockingAccess(claims)
            attempt += 1
            if attempt >= 8 || intents.map(\.url) == requested { return (access, paths) }
            access.end()
        }
    }

    /// Blocks the calling thread until `center` completes the access (or, with
    /// `preparationOnly`, the batch preparation). Cancellable by `cancel()`.
    func blockingAccess(_ claims: [Claim], preparationOnly: Bool = false) throws(CoordinationError) -> CoordinatedAccess {
        let call = registerCall()
        defer { unregisterCall(call) }
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<Result<CoordinatedAccess, CoordinationError>?>(nil)
        let completion: @Sendable (Result<CoordinatedAccess, CoordinationError>) -> Void = { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        let ticket: AccessTicket
        if preparationOnly {
            ticket = center.preparePresenters(for: claims, purpose: purpose, accessorUID: getuid(), completion: completion)
        } else {
            ticket = center.beginAccess(
                claims, purpose: purpose, accessorUID: getuid(), lifetime: .explicit, nonBlocking: false,
                deadline: claimTimeout.map { ContinuousClock.now + $0 }, includingContents: false,
                alreadyAsked: askedByEnclosingBlocks(), completion: completion)
        }
        attach(ticket, to: call)
        done.wait()
        return try outcome.withLock { $0! }.get()
    }

    /// Announces what the writes did to `urls`, judged by whether each existed before.
    func announceWrites(_ urls: [FilePath], existed: [Bool], moved: [FilePath]) {
        let purpose = self.purpose
        for (url, before) in zip(urls, existed) where !moved.contains(where: { url.isSameOrInside($0) }) {
            switch (before, Self.exists(url)) {
            case (false, true): center.announce(.appeared(url), by: purpose)
            case (true, true): center.announce(.changed(url), by: purpose)
            case (true, false): center.announce(.deleted(url), by: purpose)
            case (false, false): break
            }
        }
    }

    static func exists(_ path: FilePath) -> Bool {
        var info = stat()
        return path.withPlatformString { lstat($0, &info) } == 0
    }

    // MARK: - ForUploading

    private func coordinateForUploading<R>(_ intent: FileAccessIntent, _ reader: (FilePath) throws -> R) throws -> R {
        let copy = try perform(.read, intents: [intent]) { urls in try Self.makeUploadCopy(of: urls[0]) }
        defer { Self.removeUploadCopy(copy) }
        return try withFrame(.read, paths: [copy], asked: [:]) { try reader(copy) }.0.get()
    }

    /// Copies `path` (a tree for a directory: ContainerFS does not zip) into a fresh
    /// private directory under `$TMPDIR` or `/tmp`, with `CoreFileManager.copyItem`.
    static func makeUploadCopy(of path: FilePath) throws -> FilePath {
        let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array((base + "/containerfs-upload-XXXXXX").utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw FileManagerError.system(Errno(rawValue: errno), base)
        }
        let directory = template.withUnsafeBufferPointer { FilePath(platformString: $0.baseAddress!) }
        let copy = directory.appending(path.lastComponent.map { [$0] } ?? [])
        do {
            try CoreFileManager().copyItem(at: path, to: copy)
        } catch {
            removeUploadCopy(copy)
            throw error
        }
        return copy
    }

    /// Removes an upload copy and the private directory holding it.
    static func removeUploadCopy(_ copy: FilePath) {
        _ = try? CoreFileManager().removeItem(at: copy.removingLastComponent())
    }
}
