import Foundation
import Glibc
import Synchronization

/// One client of the control socket, as the daemon sees it: who it is (peer credentials,
/// never what it says), a way to push messages to it at any time (presenter events and
/// before-access requests), and what to undo when it goes away (presenters, claims).
///
/// Sendable note: the descriptor is written under `writeLock` only; `closeHandlers` under
/// its own lock.
public final class ControlConnection: @unchecked Sendable {
    public let caller: Caller
    let fd: CInt
    private let writeLock = Mutex(())
    private let closeHandlers = Mutex<[@Sendable () -> Void]>([])
    private let closed = Atomic<Bool>(false)

    init(fd: CInt, caller: Caller) {
        self.fd = fd
        self.caller = caller
    }

    /// Runs `handler` once when the client disconnects (or its process dies).
    public func onClose(_ handler: @escaping @Sendable () -> Void) {
        let runNow = closeHandlers.withLock { handlers -> Bool in
            if closed.load(ordering: .acquiring) { return true }
            handlers.append(handler)
            return false
        }
        if runNow { handler() }
    }

    func didClose() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let handlers = closeHandlers.withLock { h -> [@Sendable () -> Void] in
            let taken = h
            h.removeAll()
            return taken
        }
        for h in handlers { h() }
    }

    public var isClosed: Bool { closed.load(ordering: .acquiring) }

    /// Sends one JSON object as a line; false when the client is gone.
    @discardableResult
    public func send<T: Encodable>(_ message: T) -> Bool {
        guard !isClosed, var data = try? JSONEncoder().encode(message) else { return false }
        data.append(10)
        return writeLock.withLock { _ in
            data.withUnsafeBytes { raw in
                var off = 0
                while off < raw.count {
                    let n = Glibc.send(fd, raw.baseAddress! + off, raw.count - off, Int32(MSG_NOSIGNAL))
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { return false }
                    off += n
                }
                return true
            }
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
