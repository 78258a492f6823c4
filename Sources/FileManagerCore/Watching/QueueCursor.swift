import CLinux
import Glibc
import Synchronization

/// Where the store watcher's inotify queue stands, in bytes of events ever queued: what
/// is queued now plus what was read. The watcher reads the queue through it; `OwnChanges`
/// marks its records with positions from it, on request threads (DESIGN.md 14).
///
/// Plain counters and an `ioctl`, shared by both: no closure is stored (one kept in a
/// `Mutex` was re-thunked at every call, until each call walked a chain of thousands).
final class QueueCursor: Sendable {
    /// The queue's descriptor; -1 until a watcher runs (every position is then 0).
    let descriptor = Atomic<CInt>(-1)
    /// Bytes of events read from the queue.
    let readBytes = Atomic<UInt64>(0)
    /// Bytes of events read and handled (written by the watcher with its queue lock held).
    let handledBytes = Atomic<UInt64>(0)
    /// Odd while a read is under way: events have left the queue and are not yet counted in
    /// `readBytes`, so the sum would fall short.
    private let reading = Atomic<UInt64>(0)

    init() {}

    /// Reads events into `buffer`; the position of the first byte read, and the count
    /// (`read(2)`'s result). Only one thread reads at a time (the watcher's `draining`).
    func read(into buffer: UnsafeMutableRawPointer, count: Int) -> (start: UInt64, n: Int) {
        reading.add(1, ordering: .acquiringAndReleasing)
        let n = Glibc.read(descriptor.load(ordering: .relaxed), buffer, count)
        let start = readBytes.add(UInt64(max(n, 0)), ordering: .releasing).oldValue
        reading.add(1, ordering: .acquiringAndReleasing)
        return (start, n)
    }

    /// The position now, taken while no read is under way. If a read is under way at each
    /// of a few looks, `slack` more (what one read can take off the queue uncounted): too
    /// far only makes an echo of the daemon's own count as outside. A request thread never
    /// waits for the watcher's read.
    func position(slack: UInt64 = UInt64(StoreWatcher.bufferSize)) -> UInt64 {
        if let exact = exactPosition() { return exact }
        let fd = descriptor.load(ordering: .acquiring)
        return fd < 0 ? 0 : UInt64(max(clinux_bytes_queued(fd), 0)) + readBytes.load(ordering: .acquiring) + slack
    }

    /// The position now, never past it (events queued meanwhile are not counted); nil when
    /// a read was under way at each of a few looks, or without a watcher.
    func exactPosition() -> UInt64? {
        let fd = descriptor.load(ordering: .acquiring)
        guard fd >= 0 else { return nil }
        for _ in 0..<4 {
            let before = reading.load(ordering: .acquiring)
            if before & 1 == 0 {
                let sum = UInt64(max(clinux_bytes_queued(fd), 0)) + readBytes.load(ordering: .acquiring)
                if reading.load(ordering: .acquiring) == before { return sum }
            }
        }
        return nil
    }
}
