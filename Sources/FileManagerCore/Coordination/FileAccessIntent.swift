import Synchronization
import SystemPackage

/// One item of an access made with `FileCoordinator.coordinate(with:queue:byAccessor:)`:
/// Apple's NSFileAccessIntent. Its `url` is kept current: a coordinated move announced while
/// the access waits or runs (`item(at:didMoveTo:)`, or the daemon's rename fan-out)
/// rewrites it, and the access always uses the current value.
public final class FileAccessIntent: Sendable {
    public enum Kind: Sendable, Hashable {
        case reading(CoordinatedReadingOptions)
        case writing(CoordinatedWritingOptions)
    }

    public let kind: Kind
    private let currentURL: Mutex<FilePath>

    private init(kind: Kind, url: FilePath) {
        self.kind = kind
        self.currentURL = Mutex(url.coordinationNormalized)
    }

    /// An intent to read `url`.
    public static func readingIntent(with url: FilePath, options: CoordinatedReadingOptions = []) -> FileAccessIntent {
        FileAccessIntent(kind: .reading(options), url: url)
    }

    /// An intent to write `url`.
    public static func writingIntent(with url: FilePath, options: CoordinatedWritingOptions = []) -> FileAccessIntent {
        FileAccessIntent(kind: .writing(options), url: url)
    }

    /// The item's current path; use it, not the one the intent was made with.
    public var url: FilePath { currentURL.withLock { $0 } }

    public var isReading: Bool {
        if case .reading = kind { return true }
        return false
    }

    /// Follows a move of `from` (or of a directory containing the item) to `to`.
    func follow(from: FilePath, to: FilePath) {
        currentURL.withLock { url in
            guard url.isSameOrInside(from) else { return }
            url = url.replacingPrefix(from, with: to)
        }
    }
}
