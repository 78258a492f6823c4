import Foundation

/// The control protocol: newline-delimited JSON over the daemon's Unix socket
/// `STORE/control.sock` (docs/CONTROL-PROTOCOL.md). Every request carries the protocol
/// version and an id echoed in its response; the peer is identified by SO_PEERCRED, never
/// by anything it says about itself.
public struct ControlRequest: Codable, Sendable {
    public var v: Int = ControlRequest.version
    public var id: Int
    public var op: String
    public var args: [String: String]

    public static let version = 1

    public init(id: Int, op: String, args: [String: String] = [:]) {
        self.id = id
        self.op = op
        self.args = args
    }
}

public struct ControlResponse: Codable, Sendable {
    public var v: Int = ControlRequest.version
    public var id: Int
    public var ok: Bool
    /// On failure: the errno and a message naming the path and the reason.
    public var errno: Int32?
    public var error: String?
    public var result: [String: String]?
    /// For listings.
    public var items: [[String: String]]?
    /// On success: what was done only in part, one message each, naming the path and why
    /// (a FIFO left out of a bundle); the CLI prints them on stderr.
    public var warnings: [String]?

    public init(id: Int, ok: Bool, errno: Int32? = nil, error: String? = nil, result: [String: String]? = nil,
                items: [[String: String]]? = nil, warnings: [String]? = nil) {
        self.id = id
        self.ok = ok
        self.errno = errno
        self.error = error
        self.result = result
        self.items = items
        self.warnings = warnings
    }

    public static func failure(_ id: Int, _ error: FileManagerError) -> ControlResponse {
        ControlResponse(id: id, ok: false, errno: error.errno.rawValue, error: error.description)
    }
}

/// The largest request line the daemon reads; longer lines are answered with an error
/// and the connection is closed (a client cannot make the daemon buffer without bound).
public let controlMaximumLineLength = 64 * 1024
