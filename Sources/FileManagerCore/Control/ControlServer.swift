import CLinux
import Foundation
import Glibc
import Logging
import Synchronization
import SystemPackage

/// Serves the control socket: one thread accepts, one thread per connection reads lines
/// and answers them through `handler`. Peer credentials (SO_PEERCRED) become the `Caller`
/// of every request on that connection.
///
/// Sendable note: `listener` and `path` are fixed at init; `stopped` is atomic.
public final class ControlServer: @unchecked Sendable {
    public typealias Handler = @Sendable (ControlRequest, ControlConnection) -> ControlResponse

    private let listener: CInt
    public let path: String
    private let handler: Handler
    private let logger: Logger
    private let stopped = Atomic<Bool>(false)

    /// Binds `path` (replacing a stale socket left by a crashed daemon; the store lock
    /// proves no live daemon owns it).
    public init(path: String, logger: Logger, handler: @escaping Handler) throws {
        self.path = path
        self.handler = handler
        self.logger = logger
        unlink(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw FileManagerError.system(Errno(rawValue: errno), path) }
        guard let rc = UnixSocketAddress.with(path, { bind(fd, $0, $1) }) else {
            close(fd)
            throw FileManagerError.nameTooLong(path)
        }
        guard rc == 0, listen(fd, 64) == 0 else {
            let e = errno
            close(fd)
            throw FileManagerError.system(Errno(rawValue: e), path)
        }
        // Anyone may connect; what they may do is decided per request from their uid.
        chmod(path, 0o666)
        listener = fd
    }

    public func start() {
        Threads.start(named: "cfs-control") { [self] in acceptLoop() }
    }

    public func stop() {
        stopped.store(true, ordering: .releasing)
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        unlink(path)
    }

    private func acceptLoop() {
        while !stopped.load(ordering: .acquiring) {
            let client = clinux_accept_cloexec(listener)
            if client < 0 {
                switch errno {
                case EINTR, ECONNABORTED, EPROTO: continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    usleep(10_000)  // out of descriptors (DESIGN.md 28): the socket stays, clients retry
                    continue
                default: return  // the listener was closed (stop)
                }
            }
            var uid: uid_t = 0, gid: gid_t = 0, pid: pid_t = 0
            guard clinux_peer_credentials(client, &uid, &gid, &pid) == 0 else {
                close(client)
                continue
            }
            let connection = ControlConnection(fd: client, caller: Caller(uid: uid, gid: gid, pid: pid))
            let thread = Thread { [self] in serve(connection) }
            thread.start()
        }
    }

    private func serve(_ connection: ControlConnection) {
        let fd = connection.fd
        defer {
            connection.didClose()
            close(fd)
        }
        var pending = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        let decoder = JSONDecoder()
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            pending += chunk[0..<n]
            while let newline = pending.firstIndex(of: 10) {
                let line = Array(pending[..<newline])
                pending.removeSubrange(...newline)
                let response: ControlResponse
                if let request = try? decoder.decode(ControlRequest.self, from: Data(line)) {
                    if request.v != ControlRequest.version {
                        response = ControlResponse(id: request.id, ok: false, errno: EPROTO, error: "unsupported protocol version \(request.v)")
                    } else {
                        response = handler(request, connection)
                    }
                } else {
                    response = ControlResponse(id: 0, ok: false, errno: EINVAL, error: "malformed request")
                }
                guard connection.send(response) else { return }
            }
            if pending.count > controlMaximumLineLength {
                connection.send(ControlResponse(id: 0, ok: false, errno: EMSGSIZE, error: "request too long"))
                // Closing with unread input would reset the connection before the client
                // reads the answer: end our side, then discard (at most 1 MiB, 1 s) first.
                shutdown(fd, Int32(SHUT_WR))
                var timeout = timeval(tv_sec: 1, tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                var discarded = 0
                while discarded < 1 << 20 {
                    let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                    if n <= 0 { break }
                    discarded += n
                }
                return
            }
        }
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
