import Dispatch
import Glibc
import Synchronization
import SystemPackage

/// Coordinates reading and writing of files and directories with other coordinators and
/// presenters: Apple's NSFileCoordinator (docs/SEMANTICS.md §3.5) for Linux, with
/// paths as `FilePath` and errors thrown (`CoordinationError`, or the accessor's own).
///
/// - The blocking methods (`FileCoordinator+Blocking.swift`) wait on the calling thread,
///   run the accessor, and return after it; never call them on a FUSE worker or from
///   Swift concurrency — use the `async` forms (`FileCoordinator+Async.swift`) there.
/// - Purposes (docs/SEMANTICS.md §3.5): accesses of one coordinator never block each other (R5), nor those of
///   coordinators with the same `purposeIdentifier` (R6); coordinators made with the same
///   presenter share its purpose ; otherwise each coordinator has its own, so two
///   coordinators of one process exclude each other, as in Apple's API.
/// - Nesting (docs/SEMANTICS.md §3.5), per thread: nothing may be nested in a single-item read block; one
///   nested read of the same item is allowed in a single-item write block; compound blocks
///   may nest single-item calls; batches may nest anything but a batch. Forbidden nesting
///   throws `.nestingNotAllowed`, never traps. Nested calls never wait for the enclosing
///   claims (same purpose) and do not ask presenters again for what the enclosing access
///   or batch already asked.
/// - After a write the coordinator announces what happened to the item (it compares
///   whether the item existed before and after: appeared, changed or deleted), unless the
///   accessor reported a move with `item(at:didMoveTo:)`. Announcements go out while the
///   claim is still held, so presenters see them in commit order.
///
/// Use a coordinator for one operation, on one thread at a time ; `cancel()`
/// may be called from any thread.
public final class FileCoordinator: Sendable {
    public typealias ReadingOptions = CoordinatedReadingOptions
    public typealias WritingOptions = CoordinatedWritingOptions

    /// The presenter this coordinator acts for: it is never told of these accesses (R7) and
    /// its save writes pass the reads that asked for them (R8).
    public let filePresenter: (any FilePresenter)?
    /// Where claims and presenters live: `CoordinationCenter.shared` unless given.
    public let center: CoordinationCenter

    /// A coordinated block running on some thread (for nesting rules).
    struct Frame {
        enum Kind { case read, write, compound, batch }
        let kind: Kind
        /// The paths the block was handed.
        let paths: [FilePath]
        /// What presenters were already asked, by registration id.
        let asked: [UInt64: PresenterSteps]
        /// Both ends of moves the block reported: the coordinator announces no change,
        /// appearance or deletion there, the move already said it all.
        var moved: [FilePath] = []
    }

    /// A coordination call that may be waiting (for `cancel()`).
    struct Call {
        var ticket: AccessTicket?
        var cancelled = false
    }

    struct State {
        var identifier: String
        var purpose: Purpose
        var claimTimeout: Duration?
        /// Blocks running, innermost last, by thread.
        var frames: [UInt: [Frame]] = [:]
        var calls: [UInt64: Call] = [:]
        var nextCall: UInt64 = 0
        /// `async` accesses running: their accessors may hop threads, so the moves they
        /// report are kept here rather than in a thread's frame.
        var asyncAccesses = 0
        /// Both ends of moves reported while `asyncAccesses > 0`.
        var asyncMoves: [FilePath] = []
    }

    /// Protected by itself; a leaf lock (nothing is called under it).
    let state: Mutex<State>

    /// A coordinator acting for `filePresenter` (which may be nil).
    public init(filePresenter: (any FilePresenter)? = nil, center: CoordinationCenter = .shared) {
        self.filePresenter = filePresenter
        self.center = center
        let identifier: String, purpose: Purpose
        if let filePresenter {
            identifier = center.presenters.purposeIdentifier(of: filePresenter)
            purpose = center.presenters.purpose(of: filePresenter)
        } else {
            identifier = makeRandomPurposeIdentifier()
            purpose = (try? Purpose(identifier: identifier)) ?? .unique()
        }
        state = Mutex(State(identifier: identifier, purpose: purpose, claimTimeout: center.configuration.claimTimeout))
    }

    // MARK: - Purpose and deadline

    /// The purpose of this coordinator's accesses : a unique string unless set,
    /// the presenter's when made with one.
    public var purposeIdentifier: String { state.withLock { $0.identifier } }

    /// Sets `purposeIdentifier`: coordinators with the same identifier never block each
    /// other, even in different subsystems. Nil and empty are refused (`.invalidPurpose`).
    /// Do not set one on a coordinator made with a presenter .
    public func setPurposeIdentifier(_ identifier: String?) throws(CoordinationError) {
        guard let identifier else { throw .invalidPurpose }
        let purpose = try Purpose(identifier: identifier)
        state.withLock {
            $0.identifier = identifier
            $0.purpose = purpose
        }
    }

    /// The purpose claims are made for.
    public var purpose: Purpose { state.withLock { $0.purpose } }

    /// How long an access waits for its claim before `.timedOut`; nil for ever. Defaults to
    /// the center's `claimTimeout`.
    public var claimTimeout: Duration? {
        get { state.withLock { $0.claimTimeout } }
        set { state.withLock { $0.claimTimeout = newValue } }
    }

    // MARK: - Presenters (process-wide, on `CoordinationCenter.shared`)

    /// Registers `presenter` with the shared center .
    public static func addFilePresenter(_ presenter: any FilePresenter) {
        CoordinationCenter.shared.presenters.add(presenter)
    }

    /// Unregisters `presenter`; nothing happens if it is not registered .
    public static func removeFilePresenter(_ presenter: any FilePresenter) {
        CoordinationCenter.shared.presenters.remove(presenter)
    }

    /// The presenters registered with the shared center.
    public static var filePresenters: [any FilePresenter] {
        CoordinationCenter.shared.presenters.presenters
    }

    // MARK: - Cancel and moves

    /// Cancels every coordination call of this coordinator that has not started its block
    /// : each throws `.cancelled` and its block never runs. Blocks already running
    /// are not interrupted; their calls return when they finish. Returns at once.
    public func cancel() {
        let tickets = state.withLock { s -> [AccessTicket] in
            var tickets: [AccessTicket] = []
            for id in s.calls.keys {
                s.calls[id]!.cancelled = true
                if let t = s.calls[id]!.ticket { tickets.append(t) }
            }
            return tickets
        }
        for t in tickets { center.cancel(t) }
    }

    /// Tells presenters that the item at `oldURL` is now at `newURL` : call it
    /// inside the coordinated write block that moved it. The item's presenters (and, for a
    /// directory, those inside it) get `presentedItemDidMove(to:)` with their new paths;
    /// presenters of directories containing either location get `presentedSubitem(at:
    /// didMoveTo:)`; accesses waiting on the old path follow it. Old == new is harmless.
    public func item(at oldURL: FilePath, didMoveTo newURL: FilePath) {
        let old = oldURL.coordinationNormalized, new = newURL.coordinationNormalized
        guard old != new else { return }
        let purpose = state.withLock { s -> Purpose in
            let thread = Self.currentThread
            if var frames = s.frames[thread], !frames.isEmpty {
                frames[frames.count - 1].moved += [old, new]
                s.frames[thread] = frames
            } else if s.asyncAccesses > 0 {
                s.asyncMoves += [old, new]
            }
            return s.purpose
        }
        center.announce(.moved(from: old, to: new), by: purpose)
    }

    /// Sandbox extensions have no Linux counterpart: does nothing, as on iOS .
    public func item(at oldURL: FilePath, willMoveTo newURL: FilePath) {}

    // MARK: - Calls and frames

    static var currentThread: UInt { UInt(pthread_self()) }

    func registerCall() -> UInt64 {
        state.withLock { s in
            s.nextCall += 1
            s.calls[s.nextCall] = Call()
            return s.nextCall
        }
    }

    /// Attaches the waiting access to call `id`, cancelling it at once if `cancel()` came first.
    func attach(_ ticket: AccessTicket, to id: UInt64) {
        let cancelled = state.withLock { s -> Bool in
            s.calls[id]?.ticket = ticket
            return s.calls[id]?.cancelled ?? false
        }
        if cancelled { center.cancel(ticket) }
    }

    func unregisterCall(_ id: UInt64) {
        state.withLock { _ = $0.calls.removeValue(forKey: id) }
    }

    /// Throws if a call of `kind` on `paths` may not be made inside this thread's
    /// innermost block (docs/SEMANTICS.md §3.5).
    func checkNesting(_ kind: Frame.Kind, paths: [FilePath]) throws(CoordinationError) {
        let top = state.withLock { $0.frames[Self.currentThread]?.last }
        guard let top else { return }
        switch top.kind {
        case .read:
            throw .nestingNotAllowed
        case .write:
            let normalized = paths.map(\.coordinationNormalized)
            guard kind == .read, normalized.count == 1, top.paths.contains(normalized[0]) else { throw .nestingNotAllowed }
        case .compound:
            guard kind == .read || kind == .write else { throw .nestingNotAllowed }
        case .batch:
            guard kind != .batch else { throw .nestingNotAllowed }
        }
    }

    /// What enclosing blocks on this thread already asked presenters for.
    func askedByEnclosingBlocks() -> [UInt64: PresenterSteps] {
        state.withLock { s in
            var result: [UInt64: PresenterSteps] = [:]
            for frame in s.frames[Self.currentThread] ?? [] {
                result.merge(frame.asked) { $0.union($1) }
            }
            return result
        }
    }

    /// Runs `body` as a block of `kind`; returns its outcome and the moves it reported.
    func withFrame<R>(_ kind: Frame.Kind, paths: [FilePath], asked: [UInt64: PresenterSteps],
                      _ body: () throws -> R) -> (Result<R, any Error>, [FilePath]) {
        let thread = Self.currentThread
        let enclosing = askedByEnclosingBlocks()
        state.withLock { s in
            s.frames[thread, default: []].append(Frame(kind: kind, paths: paths, asked: enclosing.merging(asked) { $0.union($1) }))
        }
        let result = Result { try body() }
        let moved = state.withLock { s -> [FilePath] in
            let frame = s.frames[thread]?.popLast()
            if s.frames[thread]?.isEmpty ?? false { s.frames[thread] = nil }
            return frame?.moved ?? []
        }
        return (result, moved)
    }
}
