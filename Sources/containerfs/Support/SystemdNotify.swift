import Glibc

/// systemd's readiness protocol (sd_notify(3)) without libsystemd: one datagram, "READY=1",
/// to the socket `NOTIFY_SOCKET` names (a path, or `@name` in the abstract namespace).
enum SystemdNotify {
    /// Tells systemd the service is ready (a `Type=notify` unit), if it asked; then forgets
    /// the socket so that no child tells it anything. True when the datagram went out.
    @discardableResult
    static func ready() -> Bool {
        guard let raw = getenv("NOTIFY_SOCKET") else { return false }
        var path = Array(String(cString: raw).utf8)
        unsetenv("NOTIFY_SOCKET")
        guard !path.isEmpty else { return false }
        if path[0] == UInt8(ascii: "@") { path[0] = 0 }  // abstract socket
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        guard path.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let message = Array("READY=1\nMAINPID=\(getpid())\n".utf8)
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count)
        let sent = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, message, message.count, Int32(MSG_NOSIGNAL), $0, length) }
        }
        return sent == message.count
    }
}
