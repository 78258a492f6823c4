import Glibc
import Logging

/// Logs to syslog (the journal, under systemd) by writing RFC 3164 datagrams to `/dev/log`,
/// which journald and every syslog daemon serve. Written here rather than with syslog(3) so
/// that `CONTAINERFS_SYSLOG_SOCKET` can name another socket (tests; a syslog elsewhere).
///
/// Sendable note: the descriptor is made once and only used with sendto, which is atomic
/// per datagram.
struct SyslogLogHandler: LogHandler {
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .info
    var metadataProvider: Logger.MetadataProvider?
    let label: String

    private static let socketPath = getenv("CONTAINERFS_SYSLOG_SOCKET").map { String(cString: $0) } ?? "/dev/log"
    private static let fd: CInt = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        // facility daemon (3); severities as syslog(3) numbers them
        let severity: Int
        switch event.level {
        case .trace, .debug: severity = 7
        case .info: severity = 6
        case .notice: severity = 5
        case .warning: severity = 4
        case .error: severity = 3
        case .critical: severity = 2
        }
        let line = Array("<\(3 * 8 + severity)>containerfs[\(getpid())]: \(label): \(event.message)".utf8)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array(Self.socketPath.utf8)
        guard Self.fd >= 0, path.count < MemoryLayout.size(ofValue: address.sun_path) else { return }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                sendto(Self.fd, line, line.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT), $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
    }

    /// Whether the daemon should log to syslog: `-o syslog`, or running as a systemd service
    /// (`INVOCATION_ID`) whose standard error is not already the journal (`JOURNAL_STREAM`).
    static func wanted(option: Bool) -> Bool {
        if option { return true }
        guard getenv("INVOCATION_ID") != nil else { return false }
        guard let stream = getenv("JOURNAL_STREAM") else { return true }
        var st = stat()
        guard fstat(2, &st) == 0 else { return true }
        return String(cString: stream) != "\(st.st_dev):\(st.st_ino)"
    }
}
