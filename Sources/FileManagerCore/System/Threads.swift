import CLinux
import Foundation

/// Threads of the daemon's own.
public enum Threads {
    /// Starts a thread and names it from inside (Foundation on Linux does not pass a name
    /// given before `start` on to the system thread; a name longer than the kernel's 15
    /// bytes it drops whole): cut to 15 bytes.
    public static func start(named name: String, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread {
            clinux_name_this_thread(name)
            body()
        }
        thread.start()
    }
}
