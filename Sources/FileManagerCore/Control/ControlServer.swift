import CLinux
import Foundation
import Glibc
import Logging
import Synchronization
import SystemPackage

/// How much of the daemon the control socket may take (DESIGN.md 45). Each local user may
/// connect; none may starve the others, or the FUSE side, of threads or descriptors.
public struct ControlLimits: Sendable {
    /// Open connections of one uid.
    public var connectionsPerUser = 64
    /// Open connections in all, root's not counted (root could exhaust the daemon anyway).
    public var connections = 1024
    /// Requests that may block (`claim`) waiting at once, each on a thread of its own: per
    /// uid, and in all.
    public var waitingPerUser = 8
    public var waiting = 64
    /// Threads that run the other requests, which never wait for anyone.
    public var workers = 4
    /// A connection with no request in progress, no claim and no presenter is closed after
    /// this long without a request...
    public var idleTimeout: Duration = .seconds(60)
    /// ...and one that began a line and did not end it within this, too.
    public var lineTimeout: Duration = .seconds(10)

    public init() {}

    /// Operations the handler may block in (a claim waits until granted): never run on the
    /// event loop or the worker pool.
    public static let blockingOperations: Set<String> = ["claim"]
}

/// Serves the control socket with one event-loop thread (epoll) that accepts, reads and
/// splits lines, a small fixed pool of workers that run requests through `handler`, and a
/// thread per *waiting* request (`claim`), bounded per uid. No thread per connection: a
/// connection costs a descriptor and a few hundred bytes, and the caps of `ControlLimits`
/// bound how many there are. Peer credentials (SO_PEERCRED) become the `Caller` of every
/// request on that connection. Each connection has at most one request in progress; its
/// next line is read only after the answer went out, so answers keep their order.
///
/// Sendable note: `listener`, `path`, `limits` are fixed at init; `stopped` is atomic; the
/// connection table belongs to the loop thread; `finished` and `queue` have their locks.
public final class ControlServer: @unchecked Sendable {
    public typealias Handler = @Sendable (ControlRequest, ControlConnection) -> ControlResponse

    private let listener: CInt
    public let path: String
    private let handler: Handler
    private let logger: Logger
    private let limits: ControlLimits
    private let stopped = Atomic<Bool>(false)
    private let epoll: CInt
    /// Written by a worker when a request ends: wakes the loop to resume that connection.
    private let wake: CInt = clinux_eventfd()
    private let finished = Mutex<[CInt]>([])
    /// The uids of blocking requests that ended (for the counts of `waiting`).
    private let waitingEnded = Mutex<[uid_t]>([])
    private let queue = WorkQueue()
    /// Blocking requests in progress, per uid (loop thread only).
    private var waiting: [uid_t: Int] = [:]
    private var waitingTotal = 0

    private static let listenerKey: UInt64 = .max
    private static let wakeKey: UInt64 = .max - 1

    /// Binds `path` (replacing a stale socket left by a crashed daemon; the store lock
    /// proves no live daemon owns it).
    public init(path: String, logger: Logger, limits: ControlLimits = ControlLimits(), handler: @escaping Handler) throws {
        self.path = path
        self.handler = handler
        self.logger = logger
        var limits = limits
        // Descriptors are shared with FUSE (every open file and known directory holds one):
        // the socket may take at most an eighth of what the process may open.
        var rl = rlimit()
        if getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &rl) == 0, rl.rlim_cur < rlim_t(Int32.max) {
            limits.connections = max(16, min(limits.connections, Int(rl.rlim_cur / 8)))
        }
        self.limits = limits
        unlink(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw FileManagerError.system(Errno(rawValue: errno), path) }
        guard let rc = UnixSocketAddress.with(path, { bind(fd, $0, $1) }) else {
            close(fd)
            throw FileManagerError.nameTooLong(path)
        }
        guard rc == 0, listen(fd, 128) == 0 else {
            let e = errno
            close(fd)
            throw FileManagerError.system(Errno(rawValue: e), path)
        }
        // Anyone may connect; what they may do is decided per request from their uid, and
        // how much they may hold by `limits`.
        chmod(path, 0o666)
        listener = fd
        epoll = clinux_epoll_create()
        guard epoll >= 0, wake >= 0 else { throw FileManagerError.system(Errno(rawValue: errno), path) }
        _ = clinux_epoll_add(epoll, listener, clinux_EPOLLIN, Self.listenerKey)
        _ = clinux_epoll_add(epoll, wake, clinux_EPOLLIN, Self.wakeKey)
    }

    public func start() {
        for i in 0..<limits.workers {
            Threads.start(named: "cfs-control-\(i)") { [self] in
                while let job = queue.next() { job() }
            }
        }
        Threads.start(named: "cfs-control") { [self] in loop() }
    }

    public func stop() {
        stopped.store(true, ordering: .releasing)
        shutdown(listener, Int32(SHUT_RDWR))
        var one: UInt64 = 1
        _ = write(wake, &one, 8)
        queue.close()
        unlink(path)
    }

    // MARK: - The event loop

    /// What the loop knows of one connection. Loop thread only.
    private final class Client {
        let connection: ControlConnection
        var buffer: [UInt8] = []
        var lastRequest = ContinuousClock.now
        var lineBegun: ContinuousClock.Instant?
        /// A request of this connection is being run: its input is not read meanwhile.
        var busy = false
        /// The peer hung up while busy: close once the request ends.
        var hungUp = false
        /// After a line too long: input is discarded until this, then the connection closed.
        var drainingUntil: ContinuousClock.Instant?
        var drained = 0
        init(_ connection: ControlConnection) { self.connection = connection }
    }

    private var clients: [CInt: Client] = [:]
    private var perUser: [uid_t: Int] = [:]
    private var counted = 0
    private var listenerPausedUntil: ContinuousClock.Instant?

    private func loop() {
        var keys = [UInt64](repeating: 0, count: 64)
        var events = [UInt32](repeating: 0, count: 64)
        while !stopped.load(ordering: .acquiring) {
            // Asleep until something happens or the next deadline: an idle daemon wakes for
            // nothing (idle-mount-sleeps), not even with presenters and claims held.
            let n = clinux_epoll_wait(epoll, &keys, &events, 64, waitMilliseconds())
            if n < 0 && errno != EINTR { logger.error("control socket: epoll_wait: \(String(cString: strerror(errno)))"); break }
            for i in 0..<max(0, Int(n)) {
                switch keys[i] {
                case Self.listenerKey: acceptAll()
                case Self.wakeKey: resumeFinished()
                default: readable(CInt(truncatingIfNeeded: keys[i]), events[i])
                }
            }
            let now = ContinuousClock.now
            if let until = listenerPausedUntil, now >= until {
                listenerPausedUntil = nil
                _ = clinux_epoll_modify(epoll, listener, clinux_EPOLLIN, Self.listenerKey)
            }
            if let due = nextDeadline, now >= due { sweep(now) }
        }
        for fd in Array(clients.keys) { drop(fd) }
        close(listener)
    }

    private func acceptAll() {
        while true {
            let fd = clinux_accept_nonblocking(listener)
            if fd < 0 {
                switch errno {
                case EINTR, ECONNABORTED, EPROTO: continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors (DESIGN.md 28): stop accepting for a moment rather
                    // than spin on a listener that stays readable; clients wait in the backlog.
                    _ = clinux_epoll_modify(epoll, listener, 0, Self.listenerKey)
                    listenerPausedUntil = .now + .milliseconds(100)
                    return
                default: return  // EAGAIN: no more; or the listener was shut down (stop)
                }
            }
            var uid: uid_t = 0, gid: gid_t = 0, pid: pid_t = 0
            guard clinux_peer_credentials(fd, &uid, &gid, &pid) == 0 else {
                close(fd)
                continue
            }
            let connection = ControlConnection(fd: fd, caller: Caller(uid: uid, gid: gid, pid: pid))
            let mine = perUser[uid, default: 0]
            let refusal: String? =
                mine >= limits.connectionsPerUser
                    ? "too many control connections for uid \(uid) (limit \(limits.connectionsPerUser)); close some and retry"
                    : uid != 0 && counted >= limits.connections
                    ? "too many control connections (limit \(limits.connections)); retry later" : nil
            if let refusal {
                connection.trySend(ControlResponse(id: 0, ok: false, errno: EAGAIN, error: refusal))
                connection.closeDescriptor()
                continue
            }
            perUser[uid] = mine + 1
            if uid != 0 { counted += 1 }
            clients[fd] = Client(connection)
            _ = clinux_epoll_add(epoll, fd, clinux_EPOLLIN | clinux_EPOLLRDHUP, UInt64(UInt32(bitPattern: fd)))
        }
    }

    private func readable(_ fd: CInt, _ events: UInt32) {
        guard let client = clients[fd] else { return }
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && errno == EAGAIN { break }
            if n <= 0 {
                // End of input or an error: once nothing of this client runs, it goes.
                if client.busy {
                    // What it holds goes now (a claim granted later is released at once);
                    // the descriptor stays until the request in progress has answered.
                    client.hungUp = true
                    client.connection.didClose()
                    _ = clinux_epoll_modify(epoll, fd, 0, UInt64(UInt32(bitPattern: fd)))
                } else {
                    drop(fd)
                }
                return
            }
            if client.drainingUntil != nil {
                client.drained += n
                if client.drained > 1 << 20 { drop(fd); return }
                continue
            }
            client.buffer += chunk[0..<n]
            if client.buffer.count > controlMaximumLineLength + 4096 { break }
        }
        if client.drainingUntil == nil { serveLines(fd, client) }
    }

    /// Starts the next complete line of `client`, if it has none in progress.
    private func serveLines(_ fd: CInt, _ client: Client) {
        while !client.busy, let newline = client.buffer.firstIndex(of: 10) {
            let line = Array(client.buffer[..<newline])
            client.buffer.removeSubrange(...newline)
            client.lastRequest = .now
            switch ControlRequest.decode(line) {
            case .refused(let response):
                guard client.connection.trySend(response) else { drop(fd); return }
            case .request(let request):
                dispatch(request, fd, client)
            }
        }
        if client.buffer.isEmpty {
            client.lineBegun = nil
        } else if client.lineBegun == nil {
            client.lineBegun = .now
        }
        if !client.busy, client.buffer.count > controlMaximumLineLength {
            client.connection.trySend(ControlResponse(id: 0, ok: false, errno: EMSGSIZE,
                                                      error: "request too long (limit \(controlMaximumLineLength) bytes)"))
            // Closing with unread input would reset the connection before the client reads
            // the answer: end our side, then discard its input (at most 1 MiB, 1 s) first.
            shutdown(fd, Int32(SHUT_WR))
            client.buffer = []
            client.drainingUntil = .now + .seconds(1)
        }
    }

    private func dispatch(_ request: ControlRequest, _ fd: CInt, _ client: Client) {
        let connection = client.connection
        let uid = connection.caller.uid
        client.busy = true
        // Its input waits until the answer is out; a hang-up is still noticed.
        _ = clinux_epoll_modify(epoll, fd, clinux_EPOLLRDHUP, UInt64(UInt32(bitPattern: fd)))
        let run: @Sendable () -> Void = { [self] in
            let response = handler(request, connection)
            connection.send(response)
            finished.withLock { $0.append(fd) }
            var one: UInt64 = 1
            _ = write(wake, &one, 8)
        }
        guard ControlLimits.blockingOperations.contains(request.op) else {
            queue.add(run)
            return
        }
        settleWaitingEnded()
        let mine = waiting[uid, default: 0]
        if mine >= limits.waitingPerUser || (uid != 0 && waitingTotal >= limits.waiting) {
            let limit = mine >= limits.waitingPerUser ? "\(limits.waitingPerUser) for uid \(uid)" : "\(limits.waiting) in all"
            let refusal = ControlResponse(id: request.id, ok: false, errno: EAGAIN,
                                          error: "\(request.op): too many requests waiting (limit \(limit)); retry later")
            queue.add { [self] in
                connection.send(refusal)
                finished.withLock { $0.append(fd) }
                var one: UInt64 = 1
                _ = write(wake, &one, 8)
            }
            return
        }
        waiting[uid] = mine + 1
        if uid != 0 { waitingTotal += 1 }
        Threads.start(named: "cfs-control-w") { [self] in
            let response = handler(request, connection)
            // Counted as ended before the answer goes: a client that saw the answer and sends
            // the next request finds the slot free (`settleWaitingEnded` at its dispatch).
            waitingEnded.withLock { $0.append(uid) }
            connection.send(response)
            finished.withLock { $0.append(fd) }
            var one: UInt64 = 1
            _ = write(wake, &one, 8)
        }
    }

    /// Gives back the slots of the waiting requests that ended; on the loop's thread.
    private func settleWaitingEnded() {
        for uid in waitingEnded.withLock({ e -> [uid_t] in defer { e.removeAll() }; return e }) {
            waiting[uid, default: 1] -= 1
            if waiting[uid] == 0 { waiting[uid] = nil }
            if uid != 0 { waitingTotal -= 1 }
        }
    }

    private func resumeFinished() {
        var count: UInt64 = 0
        _ = read(wake, &count, 8)
        let done = finished.withLock { f -> [CInt] in
            let taken = f
            f.removeAll()
            return taken
        }
        settleWaitingEnded()
        for fd in done {
            guard let client = clients[fd] else { continue }
            client.busy = false
            client.lastRequest = .now
            if client.hungUp || client.connection.isClosed { drop(fd); continue }
            _ = clinux_epoll_modify(epoll, fd, clinux_EPOLLIN | clinux_EPOLLRDHUP, UInt64(UInt32(bitPattern: fd)))
            serveLines(fd, client)
        }
    }

    /// When `sweep` next has something to do (nil: never, as things stand); kept up to date
    /// by the loop, which recomputes it after every round of events.
    private var nextDeadline: ContinuousClock.Instant?

    /// The earliest of every connection's deadlines (line, idle, drain) and the listener's
    /// pause; recomputed each round: O(connections), which the caps bound.
    private func waitMilliseconds() -> Int32 {
        var due = listenerPausedUntil
        for client in clients.values {
            let own: ContinuousClock.Instant?
            if let until = client.drainingUntil {
                own = until
            } else if client.busy || client.connection.holdsResources {
                own = nil
            } else if let begun = client.lineBegun {
                own = min(begun + limits.lineTimeout, client.lastRequest + limits.idleTimeout)
            } else {
                own = client.lastRequest + limits.idleTimeout
            }
            if let own, due.map({ own < $0 }) ?? true { due = own }
        }
        nextDeadline = due
        guard let due else { return -1 }
        let left = due - .now
        if left <= .zero { return 0 }
        // rounded up, so that the deadline has passed when the wait ends
        let ms = left.components.seconds * 1000 + (left.components.attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: ms)
    }

    /// Drops connections that stalled mid-line or stayed idle too long, and ends drains.
    private func sweep(_ now: ContinuousClock.Instant) {
        for (fd, client) in clients {
            if let until = client.drainingUntil {
                if now >= until { drop(fd) }
                continue
            }
            if client.busy || client.connection.holdsResources { continue }
            if let begun = client.lineBegun, now - begun > limits.lineTimeout {
                client.connection.trySend(ControlResponse(id: 0, ok: false, errno: ETIMEDOUT,
                                                          error: "request line not finished within \(limits.lineTimeout): closing"))
                drop(fd)
            } else if now - client.lastRequest > limits.idleTimeout {
                drop(fd)
            }
        }
    }

    private func drop(_ fd: CInt) {
        guard let client = clients.removeValue(forKey: fd) else { return }
        let uid = client.connection.caller.uid
        perUser[uid, default: 1] -= 1
        if perUser[uid] == 0 { perUser[uid] = nil }
        if uid != 0 { counted -= 1 }
        _ = clinux_epoll_remove(epoll, fd)
        shutdown(fd, Int32(SHUT_RDWR))  // ends a push waiting for this client to read
        client.connection.didClose()
        client.connection.closeDescriptor()
    }
}

/// A client of the control socket (the CLI talking to a live daemon).
///
/// Sendable note: used by one thread at a time (the CLI's main thread, then, for a held
/// claim or a presenter, one reader thread); it has no internal locking.
public final class ControlClient: @unchecked Sendable {
    private let fd: CInt
    private var nextID = 1
    private var pending = [UInt8]()

    /// Connects to `path`; nil when no daemon listens there.
    public init?(path: String) {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        guard UnixSocketAddress.with(path, { connect(fd, $0, $1) }) == 0 else { close(fd); return nil }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Messages pushed by the daemon while a call was waiting for its response.
    public private(set) var pushed: [ControlPush] = []

    /// Sends a request and returns its response; pushed messages that arrive meanwhile are
    /// kept in `pushed` (or handed to `onPush`).
    public func call(_ op: String, _ args: [String: String] = [:], onPush: ((ControlPush) -> Void)? = nil) throws -> ControlResponse {
        let request = ControlRequest(id: nextID, op: op, args: args)
        nextID += 1
        var data = try JSONEncoder().encode(request)
        data.append(10)
        try data.withUnsafeBytes { raw in
            var off = 0
            while off < raw.count {
                let n = write(fd, raw.baseAddress! + off, raw.count - off)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { throw FileManagerError.system(.brokenPipe, "control socket") }
                off += n
            }
        }
        while true {
            let line = try readLine()
            if let push = try? JSONDecoder().decode(ControlPush.self, from: line), push.event != nil || push.request != nil {
                if let onPush { onPush(push) } else { pushed.append(push) }
                continue
            }
            return try JSONDecoder().decode(ControlResponse.self, from: line)
        }
    }

    /// Waits for the next pushed message (presenter clients); nil when the daemon is gone.
    public func nextPush() -> ControlPush? {
        if !pushed.isEmpty { return pushed.removeFirst() }
        while let line = try? readLine() {
            if let push = try? JSONDecoder().decode(ControlPush.self, from: line), push.event != nil || push.request != nil {
                return push
            }
        }
        return nil
    }

    private func readLine() throws -> Data {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let newline = pending.firstIndex(of: 10) {
                let line = Array(pending[..<newline])
                pending.removeSubrange(...newline)
                return Data(line)
            }
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw FileManagerError.system(.brokenPipe, "control socket: daemon closed the connection") }
            pending += chunk[0..<n]
        }
    }

    /// Sends a request without waiting for its response (answers to presenter requests).
    public func post(_ op: String, _ args: [String: String] = [:]) {
        let request = ControlRequest(id: nextID, op: op, args: args)
        nextID += 1
        guard var data = try? JSONEncoder().encode(request) else { return }
        data.append(10)
        data.withUnsafeBytes { raw in _ = Glibc.send(fd, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL)) }
    }
}

/// A Unix socket address for `bind` and `connect`.
enum UnixSocketAddress {
    /// Calls `body` with the address of `path`; nil when the path does not fit (108 bytes).
    static func with(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> CInt) -> CInt? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }
}
