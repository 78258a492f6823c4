/// A number of seconds given as text (a CLI option, a control request): finite, from 0 to
/// 10^9 (31 years). The bound keeps every conversion to whole milliseconds in range:
/// `Int(Double.infinity)` traps, and a trap in the daemon is a dead mount — which any user
/// could cause through the control socket (`coordinate --timeout 1e300` did).
enum Seconds {
    static let range: ClosedRange<Double> = 0...1e9
    static let expectation = "expects a number of seconds from 0 to 1000000000"

    /// The number in `text`, or nil when it is not one or out of `range` (NaN included).
    static func parse(_ text: String?) -> Double? {
        guard let text, let n = Double(text), range.contains(n) else { return nil }
        return n
    }

    /// `seconds` (within `range`) as a duration in whole milliseconds.
    static func duration(_ seconds: Double) -> Duration { .milliseconds(Int(seconds * 1000)) }
}
