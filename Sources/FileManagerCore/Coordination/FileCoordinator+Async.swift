import Dispatch
import Glibc
import Synchronization
import SystemPackage

// MARK: - Asynchronous forms: waiting never blocks a thread (docs/SEMANTICS.md §3.5)

extension FileCoordinator {
    /// `coordinate(readingItemAt:options:byAccessor:)` for Swift concurrency: the task is
    /// suspended (not a thread blocked) while the claim and presenters are awaited. Task
    /// cancellation while waiting throws `.cancelled`. `nonisolated(nonsending)`: the
    /// accessor runs in the caller's isolation (an actor's state may be used in it, and it
    /// need not be `Sendable`). `.forUploading` is not offered here (it is ignored).
    nonisolated(nonsending)
    public func coordinate<R>(readingItemAt url: FilePath, options: ReadingOptions = [],
                              byAccessor reader: (FilePath) async throws -> R) async throws -> R {
        let intent = FileAccessIntent.readingIntent(with: url, options: options.subtracting([.forUploading]))
        if options.contains(.immediatelyAvailableMetadataOnly) { return try await reader(intent.url) }
        return try await perform(intents: [intent]) { try await reader($0[0]) }
    }

    /// `coordinate(writingItemAt:options:byAccessor:)` for Swift concurrency.
    nonisolated(nonsending)
    public func coordinate<R>(writingItemAt url: FilePath, options: WritingOptions = [],
                              byAccessor writer: (FilePath) async throws -> R) async throws -> R {
        try await perform(intents: [.writingIntent(with: url, options: options)]) { try await writer($0[0]) }
    }

    /// Any mix of reads and writes in one access, for Swift concurrency: the accessor gets
    /// the intents' current paths, in order. Prefer one call with several intents to
    /// several concurrent calls .
    nonisolated(nonsending)
    public func coordinate<R>(with intents: [FileAccessIntent],
                              byAccessor accessor: ([FilePath]) async throws -> R) async throws -> R {
        try await perform(intents: intents, accessor)
    }

    /// Apple's `coordinate(with:queue:byAccessor:)` : returns at once; when the
    /// access is granted and prepared (or has failed), `accessor` runs on `queue` with nil
    /// (use each intent's `url` then) or the error (then do not touch the items). The
    /// access lasts until the accessor returns: do not hand the items to other threads.
    public func coordinate(with intents: [FileAccessIntent], queue: DispatchQueue,
                           byAccessor accessor: @escaping @Sendable ((any Error)?) -> Void) {
        center.track(intents)
        let call = registerCall()
        let finish: @Sendable () -> Void = { [self] in
            center.untrack(intents)
            unregisterCall(call)
        }
        startIntentAccess(intents, call: call, attempt: 1) { [self] result in
            switch result {
            case .failure(let error):
                finish()
                queue.async { accessor(error) }
            case .success(let access):
                queue.async { [self] in
                    let urls = intents.map(\.url)
                    runAccessor(intents, urls: urls, access: access) { accessor(nil) }
                    finish()
                }
            }
        }
    }

    // MARK: - Machinery

    nonisolated(nonsending)
    private func perform<R>(intents: [FileAccessIntent], _ body: ([FilePath]) async throws -> R) async throws -> R {
        center.track(intents)
        defer { center.untrack(intents) }
        var attempt = 0
        var access: CoordinatedAccess
        var paths: [FilePath]
        repeat {
            let requested = intents.map(\.url)
            let resolved = claims(for: intents, at: requested)
            access = try await awaitAccess(resolved.claims)
            paths = resolved.paths
            attempt += 1
            if attempt < 8 && intents.map(\.url) != requested {
                access.end()
                continue
            }
            break
        } while true
        let writes = intents.indices.filter { !intents[$0].isReading }
        let watched = !center.presenters.isEmpty
        let existed = watched ? writes.map { Self.exists(paths[$0]) } : []
        let mark = state.withLock { s -> Int in
            s.asyncAccesses += 1
            return s.asyncMoves.count
        }
        let result: Result<R, any Error>
        do { result = .success(try await body(paths)) } catch { result = .failure(error) }
        let moved = state.withLock { s -> [FilePath] in
            let moved = Array(s.asyncMoves[min(mark, s.asyncMoves.count)...])
            s.asyncAccesses -= 1
            if s.asyncAccesses == 0 { s.asyncMoves = [] }
            return moved
        }
        if watched { announceWrites(writes.map { paths[$0] }, existed: existed, moved: moved) }
        access.end()
        return try result.get()
    }

    /// Suspends until `center` completes the access; task cancellation cancels it.
    private func awaitAccess(_ claims: [Claim]) async throws -> CoordinatedAccess {
        let call = registerCall()
        defer { unregisterCall(call) }
        let asked = askedByEnclosingBlocks()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<CoordinatedAccess, any Error>) in
                let ticket = center.beginAccess(
                    claims, purpose: purpose, accessorUID: getuid(), lifetime: .explicit, nonBlocking: false,
                    deadline: claimTimeout.map { ContinuousClock.now + $0 }, includingContents: false,
                    alreadyAsked: asked) { result in continuation.resume(with: result) }
                attach(ticket, to: call)
            }
        } onCancel: {
            cancelCall(call)
        }
    }

    /// Cancels one call (task cancellation), like `cancel()` does for all.
    private func cancelCall(_ id: UInt64) {
        let ticket = state.withLock { s -> AccessTicket? in
            s.calls[id]?.cancelled = true
            return s.calls[id]?.ticket
        }
        if let ticket { center.cancel(ticket) }
    }

    /// Requests the access for the intents' current paths; if they moved while it waited,
    /// gives it up and requests the new paths (a few times at most).
    private func startIntentAccess(_ intents: [FileAccessIntent], call: UInt64, attempt: Int,
                                   completion: @escaping @Sendable (Result<CoordinatedAccess, CoordinationError>) -> Void) {
        let requested = intents.map(\.url)
        let (claims, _) = claims(for: intents, at: requested)
        let ticket = center.beginAccess(
            claims, purpose: purpose, accessorUID: getuid(), lifetime: .explicit, nonBlocking: false,
            deadline: claimTimeout.map { ContinuousClock.now + $0 }, includingContents: false,
            alreadyAsked: [:]) { [self] result in
                if case .success(let access) = result, attempt < 8, intents.map(\.url) != requested {
                    access.end()
                    startIntentAccess(intents, call: call, attempt: attempt + 1, completion: completion)
                    return
                }
                completion(result)
            }
        attach(ticket, to: call)
    }

    /// Runs an intent accessor as a compound block (nested single-item calls allowed),
    /// then announces and ends the access.
    private func runAccessor(_ intents: [FileAccessIntent], urls: [FilePath], access: CoordinatedAccess,
                             _ accessor: () -> Void) {
        let writes = intents.indices.filter { !intents[$0].isReading }
        let watched = !center.presenters.isEmpty
        let existed = watched ? writes.map { Self.exists(urls[$0]) } : []
        let (_, moved) = withFrame(.compound, paths: urls, asked: access.askedSteps) { accessor() }
        if watched { announceWrites(writes.map { urls[$0] }, existed: existed, moved: moved) }
        access.end()
    }
}
