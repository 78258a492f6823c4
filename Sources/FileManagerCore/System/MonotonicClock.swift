import Glibc

/// Nanoseconds of `CLOCK_MONOTONIC`: deadlines and rate limits that no change of the
/// wall clock may move.
public enum MonotonicClock {
    public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
