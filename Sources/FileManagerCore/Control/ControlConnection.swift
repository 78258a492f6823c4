import Foundation
import Glibc
import Synchronization

/// One client of the control socket, as the daemon sees it: who it is (peer credentials,
/// never what it says), a way to push messages to it at any time (presenter events and
/// before-access requests), and what to undo when it goes away (presenters, claims).
///
/// Sendable note: the descriptor is written and closed under `writeLock` only (so a push
/// from another thread never meets a closed or reused descriptor); `closeHandlers` under
/// its own lock.
public final class ControlConnection: @unchecked Sendable {
    public let caller: Caller
    let fd: CInt
    /// Protects writes to `fd` and its closing; true once closed.
    private let writeLock = Mutex(false)
    private let closeHandlers = Mutex<[@Sendable () -> Void]>([])
    private let closed = Atomic<Bool>(false)
    /// Set once a claim or a presenter is registered on the connection (an `onClose`
    /// handler): such a connection is long-lived by design and never dropped as idle.
    private let holding = Atomic<Bool>(false)

    init(fd: CInt, caller: Caller) {
        self.fd = fd
        self.caller = caller
    }

    /// Runs `handler` once when the client disconnects (or its process dies).
    public func onClose(_ handler: @escaping @Sendable () -> Void) {
        holding.store(true, ordering: .releasing)
        let runNow = closeHandlers.withLock { handlers -> Bool in
            if closed.load(ordering: .acquiring) { return true }
            handlers.append(handler)
            return false
        }
        if runNow { handler() }
    }

    /// Whether the connection holds a claim or a presenter (or did).
    var holdsResources: Bool { holding.load(ordering: .acquiring) }

    func didClose() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let handlers = closeHandlers.withLock { h -> [@Sendable () -> Void] in
            let taken = h
            h.removeAll()
            return taken
        }
        for h in handlers { h() }
    }

    /// Closes the descriptor once no send is using it. Call `shutdown` first to end a send
    /// waiting for a client that does not read.
    func closeDescriptor() {
        writeLock.withLock { fdClosed in
            guard !fdClosed else { return }
            fdClosed = true
            close(fd)
        }
    }

    public var isClosed: Bool { closed.load(ordering: .acquiring) }

    /// How long a send waits for a client that does not read before giving up on it.
    static let sendPatience: Int32 = 10_000

    /// Sends one JSON object as a line; false when the client is gone, or has not read for
    /// `sendPatience` ms (then the connection is shut down: its loop drops it).
    @discardableResult
    public func send<T: Encodable>(_ message: T) -> Bool {
        guard !isClosed, let data = Self.line(message) else { return false }
        return writeLock.withLock { fdClosed in
            !fdClosed && write(data, waitingUpTo: Self.sendPatience)
        }
    }

    /// Sends without waiting, from the event loop: false when the line does not fit in the
    /// socket's buffer at once, or another thread is sending.
    @discardableResult
    func trySend<T: Encodable>(_ message: T) -> Bool {
        guard let data = Self.line(message) else { return false }
        return writeLock.withLockIfAvailable { fdClosed in
            !fdClosed && write(data, waitingUpTo: 0)
        } ?? false
    }

    private static func line<T: Encodable>(_ message: T) -> Data? {
        guard var data = try? JSONEncoder().encode(message) else { return nil }
        data.append(10)
        return data
    }

    /// The socket is non-blocking (the event loop reads it): a full buffer waits in poll.
    private func write(_ data: Data, waitingUpTo milliseconds: Int32) -> Bool {
        data.withUnsafeBytes { raw in
            var off = 0
            while off < raw.count {
                let n = Glibc.send(fd, raw.baseAddress! + off, raw.count - off, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                if n > 0 { off += n; continue }
                if n < 0 && errno == EINTR { continue }
                if n < 0 && errno == EAGAIN && milliseconds > 0 {
                    var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    if poll(&p, 1, milliseconds) == 1 && p.revents & Int16(POLLOUT) != 0 { continue }
                }
                shutdown(fd, Int32(SHUT_RDWR))  // not reading, or gone: the loop drops it
                return false
            }
            return true
        }
    }
}

/// A message the daemon pushes to a client without being asked: an after-the-fact event
/// (`event` set) or a before-access request the client must answer once (`request` set).
public struct ControlPush: Codable, Sendable {
    public var v: Int = ControlRequest.version
    /// didChange, didMove, subitemDidAppear, subitemDidChange, subitemDidMove, didDelete,
    /// subitemDidDelete, resync; `progress` for a request under way.
    public var event: String?
    /// The id to answer with `presenter.answer`.
    public var request: Int?
    /// For requests: save, accommodateDeletion, accommodateSubitemDeletion,
    /// relinquishToReader, relinquishToWriter.
    public var steps: [String]?
    public var presenter: Int?
    public var path: String?
    public var to: String?
    public var uncoordinated: Bool?
    public var time: String?
    /// `progress` events of a long request (`inbox.deliver`): bytes done of `total`.
    public var done: Int64?
    public var total: Int64?

    public init(event: String? = nil, request: Int? = nil, steps: [String]? = nil, presenter: Int? = nil,
                path: String? = nil, to: String? = nil, uncoordinated: Bool? = nil, time: String? = nil,
                done: Int64? = nil, total: Int64? = nil) {
        self.event = event
        self.request = request
        self.steps = steps
        self.presenter = presenter
        self.path = path
        self.to = to
        self.uncoordinated = uncoordinated
        self.time = time
        self.done = done
        self.total = total
    }
}
