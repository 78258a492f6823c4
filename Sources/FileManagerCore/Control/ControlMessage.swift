import Foundation
import Glibc

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

    private enum CodingKeys: String, CodingKey { case v, id, op, args }

    /// `args` may be left out: several operations take none (docs/CONTROL-PROTOCOL.md).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        v = try c.decode(Int.self, forKey: .v)
        id = try c.decode(Int.self, forKey: .id)
        op = try c.decode(String.self, forKey: .op)
        args = try c.decodeIfPresent([String: String].self, forKey: .args) ?? [:]
    }

    public enum Decoded: Sendable {
        case request(ControlRequest)
        /// The line is not a request the daemon serves: the answer says which field is wrong.
        case refused(ControlResponse)
    }

    /// Reads one request line.
    public static func decode(_ line: [UInt8]) -> Decoded {
        let data = Data(line)
        do {
            let request = try JSONDecoder().decode(ControlRequest.self, from: data)
            guard request.v == version else {
                return .refused(ControlResponse(id: request.id, ok: false, errno: EPROTO,
                                                error: "v: unsupported protocol version \(request.v) (this daemon speaks \(version))"))
            }
            return .request(request)
        } catch let error as DecodingError {
            // Echo the id when the line has a usable one, so the client can match the answer.
            let id = (try? JSONSerialization.jsonObject(with: data) as? [String: Any])?["id"] as? Int ?? 0
            return .refused(ControlResponse(id: id, ok: false, errno: EINVAL, error: "malformed request: \(describe(error))"))
        } catch {
            return .refused(ControlResponse(id: 0, ok: false, errno: EINVAL, error: "malformed request: \(error)"))
        }
    }

    /// Names the field a decoding error is about, and what was wrong with it.
    static func describe(_ error: DecodingError) -> String {
        func field(_ path: [any CodingKey], _ key: (any CodingKey)? = nil) -> String {
            let names = (path + (key.map { [$0] } ?? [])).map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return names.isEmpty ? "the line" : names.joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(field(context.codingPath, key)): missing"
        case .typeMismatch(let type, let context):
            return "\(field(context.codingPath)): expected \(type == String.self ? "a string" : type == Int.self ? "an integer" : "\(type)")"
                + (context.codingPath.first?.stringValue == "args" ? " (args values are strings)" : "")
        case .valueNotFound(let type, let context):
            return "\(field(context.codingPath)): null where \(type) was expected"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "not a JSON object" : "\(field(context.codingPath)): invalid value"
        @unknown default:
            return "\(error)"
        }
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
