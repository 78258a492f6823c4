import Dispatch
import Foundation
import Synchronization
import SystemPackage

/// A presenter living in another process, registered over the control socket
/// (`presenter.register`): the registry asks and tells it like any `FilePresenter`, and it
/// forwards each message as one JSON line (docs/CONTROL-PROTOCOL.md). Before-access requests
/// wait for the client's `presenter.answer`; the registry's presenter deadline bounds that
/// wait. When the connection closes, pending requests are answered "done" and the presenter
/// is unregistered: a dead presenter never blocks anyone.
///
/// Sendable note: `path` is fixed; pending answers live behind their mutex; messages go out
/// on `queue`, one at a time, in the order they were produced.
public final class RemotePresenter: FilePresenter, @unchecked Sendable {
    public let id: Int
    public let path: FilePath
    public let uid: UInt32
    let connection: ControlConnection
    private let queue: DispatchQueue
    private let pending = Mutex<[Int: @Sendable (PresenterReply) -> Void]>([:])
    private let nextRequest = Atomic<Int>(1)
    /// The registry this presenter is in, for its current path (set once, at registration).
    nonisolated(unsafe) weak var registry: PresenterRegistry?

    public init(id: Int, path: FilePath, connection: ControlConnection) {
        self.id = id
        self.path = path
        self.uid = connection.caller.uid
        self.connection = connection
        queue = DispatchQueue(label: "containerfs.remote-presenter.\(id)")
    }

    public var presentedItemURL: FilePath? { path }

    // MARK: - Before the access

    public func handle(_ request: PresenterRequest, reply: @escaping @Sendable (PresenterReply) -> Void) {
        let number = nextRequest.add(1, ordering: .relaxed).oldValue
        pending.withLock { $0[number] = reply }
        // The registry follows the item across moves at once; notifications may lag behind.
        var subject = request.subitemPath ?? registry?.presentedPath(of: self) ?? current.withLock { $0 ?? path }
        subject.root = nil
        let push = ControlPush(request: number, steps: Self.names(request.steps), presenter: id, path: subject.string)
        queue.async { [self] in
            if !connection.send(push) { answer(number, errno: 0) }
        }
    }

    /// The client's answer to request `number`: 0 = done, otherwise the errno refusing it.
    public func answer(_ number: Int, errno: Int32) {
        guard let reply = pending.withLock({ $0.removeValue(forKey: number) }) else { return }
        reply(errno == 0 ? .accepted(reacquirer: nil) : .refused(Errno(rawValue: errno)))
    }

    /// The connection closed: everything pending proceeds.
    public func abandon() {
        let all = pending.withLock { p -> [@Sendable (PresenterReply) -> Void] in
            let taken = Array(p.values)
            p.removeAll()
            return taken
        }
        for reply in all { reply(.accepted(reacquirer: nil)) }
    }

    static func names(_ steps: PresenterSteps) -> [String] {
        var out: [String] = []
        if steps.contains(.save) { out.append("save") }
        if steps.contains(.accommodateDeletion) { out.append("accommodateDeletion") }
        if steps.contains(.accommodateSubitemDeletion) { out.append("accommodateSubitemDeletion") }
        if steps.contains(.relinquishToReader) { out.append("relinquishToReader") }
        if steps.contains(.relinquishToWriter) { out.append("relinquishToWriter") }
        return out
    }

    // MARK: - After the access

    /// Where the presented item is now (moves rewrite it), for events about the item itself.
    private let current = Mutex<FilePath?>(nil)

    public func handle(_ notification: PresenterNotification) {
        send(push(notification, uncoordinated: false))
    }

    /// A change found by watching the store (made outside the mount).
    public func tellUncoordinated(_ notification: PresenterNotification) {
        send(push(notification, uncoordinated: true))
    }

    private func push(_ notification: PresenterNotification, uncoordinated: Bool) -> ControlPush {
        let here = current.withLock { c -> FilePath in
            let was = c ?? path
            if case .didMove(let to) = notification { c = to }
            return was
        }
        return Self.push(notification, presenter: id, item: here, uncoordinated: uncoordinated)
    }

    private func send(_ push: ControlPush) {
        queue.async { [connection] in connection.send(push) }
    }

    static func push(_ n: PresenterNotification, presenter: Int, item: FilePath, uncoordinated: Bool) -> ControlPush {
        let time = ISO8601DateFormatter().string(from: Date())
        // On the wire, paths are relative to the mount (docs/CONTROL-PROTOCOL.md).
        func wire(_ p: FilePath?) -> String? {
            guard var p else { return nil }
            p.root = nil
            return p.string
        }
        func p(_ event: String, _ path: FilePath?, _ to: FilePath? = nil) -> ControlPush {
            ControlPush(event: event, presenter: presenter, path: wire(path), to: wire(to), uncoordinated: uncoordinated, time: time)
        }
        switch n {
        case .didChange: return p("didChange", item)
        case .didMove(let to): return p("didMove", item, to)
        case .didDelete: return p("didDelete", item)
        case .subitemDidAppear(let at): return p("subitemDidAppear", at)
        case .subitemDidChange(let at): return p("subitemDidChange", at)
        case .subitemDidMove(let from, let to): return p("subitemDidMove", from, to)
        case .subitemDidDelete(let at): return p("subitemDidDelete", at)
        case .resync: return p("resync", item)
        }
    }
}
