import SystemPackage

/// Why a coordinated access did not happen. The accessor (block, FUSE operation) never
/// runs when one of these is reported (docs/SEMANTICS.md §3.5, §3.4).
public enum CoordinationError: Error, Sendable, Hashable {
    /// The waiter was cancelled: `FileCoordinator.cancel()`, task cancellation, or a
    /// FUSE_INTERRUPT for the waiting request (EINTR; Apple's `NSUserCancelledError`).
    case cancelled
    /// The claim's deadline passed while it waited (EBUSY; Apple's `fileLocking`).
    case timedOut
    /// A non-blocking request (`O_NONBLOCK`) met a conflicting claim (EAGAIN).
    case wouldBlock
    /// Waiting would close a cycle in the wait-for graph between purposes; the newest
    /// waiter of the cycle gets this (EDEADLK, as `F_SETLKW` does).
    case deadlock
    /// A presenter answered its before-access request with an error . The errno is
    /// the presenter's own when it names EBUSY, EACCES, EPERM or EAGAIN, else EBUSY.
    case presenterFailed(Errno)
    /// A coordination call made from inside a block that forbids nesting (docs/SEMANTICS.md §3.5).
    case nestingNotAllowed
    /// A nil or empty purpose identifier .
    case invalidPurpose

    /// The errno this error becomes through the mount. A switch, never arithmetic.
    public var errno: Errno {
        switch self {
        case .cancelled: return .interrupted
        case .timedOut: return .resourceBusy
        case .wouldBlock: return .resourceTemporarilyUnavailable
        case .deadlock: return .deadlock
        case .presenterFailed(let e): return e
        case .nestingNotAllowed: return .invalidArgument
        case .invalidPurpose: return .invalidArgument
        }
    }

    /// The errno of any error the coordination layer can throw: a `CoordinationError`
    /// through `errno`, everything else through `FileManagerError.errno(of:)` (which
    /// gives EIO for unknown errors). The bridge's error funnel should use this, or add
    /// the `CoordinationError` line to its own.
    public static func errno(of error: any Error) -> Errno {
        if let e = error as? CoordinationError { return e.errno }
        return FileManagerError.errno(of: error)
    }

    /// The errno a presenter's refusal fails the access with (docs/SEMANTICS.md §3.4): only the errnos that
    /// make sense for "someone else is using this item" pass; everything else is EBUSY,
    /// so a presenter cannot make an open report, say, ENOENT.
    static func presenterErrno(_ error: any Error) -> Errno {
        let candidate: Errno?
        switch error {
        case let e as Errno: candidate = e
        case let e as FileManagerError: candidate = e.errno
        case let e as CoordinationError: candidate = e.errno
        default: candidate = nil
        }
        switch candidate {
        case .some(.resourceBusy), .some(.permissionDenied), .some(.notPermitted),
             .some(.resourceTemporarilyUnavailable):
            return candidate!
        default:
            return .resourceBusy
        }
    }
}

extension CoordinationError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .cancelled: return "coordination cancelled"
        case .timedOut: return "timed out waiting for a coordinated access"
        case .wouldBlock: return "a conflicting coordinated access is in progress"
        case .deadlock: return "waiting would deadlock with another coordinated access"
        case .presenterFailed(let e): return "a file presenter refused the access: \(e)"
        case .nestingNotAllowed: return "coordination calls cannot be nested here"
        case .invalidPurpose: return "a purpose identifier must not be empty"
        }
    }
}

extension FileManagerError {
    /// The domain error for a coordination failure on `path`, for CLI messages: a missed
    /// deadline is `.busy`, everything else keeps its errno.
    public init(_ error: CoordinationError, path: String) {
        switch error {
        case .timedOut: self = .busy(path)
        default: self = .system(error.errno, path)
        }
    }
}
