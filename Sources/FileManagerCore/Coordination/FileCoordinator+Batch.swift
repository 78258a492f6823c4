import Dispatch
import Glibc
import Synchronization
import SystemPackage

// MARK: - Batch preparation (docs/SEMANTICS.md §3.5)

extension FileCoordinator {
    /// Prepares presenters once for a batch of reads and writes : every presenter
    /// of the items **and of everything inside them** gets one request (save unless
    /// `.withoutChanges` for reads; save for `.forMerging` writes; relinquish; accommodate
    /// deletion), then `batchAccessor` runs and must make the individual coordinated calls
    /// itself — they ask no presenter again for what the batch asked — and call the
    /// completion handler (from any thread) once they have all finished.
    ///
    /// The batch takes no claim of its own; the nested calls do. It returns when the
    /// accessor returns; the batch itself (presenters kept relinquished) ends when the
    /// completion handler is called or, if it never is, after the center's `batchTimeout`.
    public func prepare(forReadingItemsAt readingURLs: [FilePath], options readingOptions: ReadingOptions = [],
                        writingItemsAt writingURLs: [FilePath], options writingOptions: WritingOptions = [],
                        byAccessor batchAccessor: (_ completionHandler: @escaping @Sendable () -> Void) throws -> Void) throws {
        try checkNesting(.batch, paths: readingURLs + writingURLs)
        let intents = readingURLs.map { FileAccessIntent.readingIntent(with: $0, options: readingOptions) }
            + writingURLs.map { FileAccessIntent.writingIntent(with: $0, options: writingOptions) }
        let (claims, paths) = claims(for: intents, at: intents.map(\.url))
        let access = try blockingAccess(claims, preparationOnly: true)
        let batch = BatchEnd(access: access)
        let (seconds, attoseconds) = center.configuration.batchTimeout.components
        let nanos = max(0, seconds) * 1_000_000_000 + max(0, attoseconds / 1_000_000_000)
        center.timerQueue.asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: nanos))) { batch.end() }
        let (result, _) = withFrame(.batch, paths: paths, asked: access.askedSteps) {
            try batchAccessor { batch.end() }
        }
        try result.get()
    }
}

/// Ends a batch exactly once: by its completion handler or by the deadline.
private final class BatchEnd: Sendable {
    private let access: CoordinatedAccess
    private let ended = Atomic<Bool>(false)

    init(access: CoordinatedAccess) { self.access = access }

    func end() {
        guard !ended.exchange(true, ordering: .acquiringAndReleasing) else { return }
        access.end()
    }
}
