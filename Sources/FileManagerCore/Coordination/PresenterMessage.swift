import SystemPackage

/// What a presenter is asked to do before an access (docs/SEMANTICS.md §3.6). One
/// request names all its steps; the presenter performs them in the order save →
/// accommodate deletion → relinquish (docs/SEMANTICS.md §3.6) and answers once.
public struct PresenterSteps: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// `savePresentedItemChanges`: write unsaved changes now (reads without
    /// `withoutChanges`, writes `forMerging`).
    public static let save = PresenterSteps(rawValue: 1 << 0)
    /// `accommodatePresentedItemDeletion`: the item (or, for a directory, an ancestor of
    /// it) is about to be deleted or replaced.
    public static let accommodateDeletion = PresenterSteps(rawValue: 1 << 1)
    /// `accommodatePresentedSubitemDeletion(at:)`: an item inside the presented package is
    /// about to be deleted (`PresenterRequest.subitemPath` names it).
    public static let accommodateSubitemDeletion = PresenterSteps(rawValue: 1 << 2)
    /// `relinquishPresentedItem(toReader:)`.
    public static let relinquishToReader = PresenterSteps(rawValue: 1 << 3)
    /// `relinquishPresentedItem(toWriter:)`.
    public static let relinquishToWriter = PresenterSteps(rawValue: 1 << 4)

    /// The steps left to ask for when `done` were already performed for the same purpose
    /// (nested calls and batches ask each presenter once): a writer relinquish covers a
    /// reader relinquish.
    func subtracting(done: PresenterSteps) -> PresenterSteps {
        var left = subtracting(done)
        if done.contains(.relinquishToWriter) { left.remove(.relinquishToReader) }
        return left
    }
}

/// One before-access request to one presenter.
public struct PresenterRequest: Sendable, Hashable {
    public var steps: PresenterSteps
    /// For `.accommodateSubitemDeletion`: the item inside the package to be deleted.
    public var subitemPath: FilePath?
    /// The purpose of the access the presenter is asked to make way for.
    public var requestingPurpose: Purpose

    public init(steps: PresenterSteps, subitemPath: FilePath? = nil, requestingPurpose: Purpose) {
        self.steps = steps
        self.subitemPath = subitemPath
        self.requestingPurpose = requestingPurpose
    }
}

/// A presenter's one answer to a `PresenterRequest`.
public enum PresenterReply: Sendable {
    /// Done; the access may go ahead. `reacquirer`, if any, is called (on the presenter's
    /// queue) when the access ends: Apple's reacquirer block of relinquish (docs/SEMANTICS.md §3.6).
    case accepted(reacquirer: (@Sendable () -> Void)?)
    /// The presenter refuses: the access fails (`CoordinationError.presenterFailed`).
    case refused(any Error)
}

/// An after-the-fact message to one presenter (docs/SEMANTICS.md §3.6), delivered on its own serial queue in
/// commit order, never for its own purpose's accesses.
public enum PresenterNotification: Sendable, Hashable {
    /// The item's contents or attributes changed (`presentedItemDidChange`).
    case didChange
    /// The item moved; the presenter now presents `to` (`presentedItemDidMove(to:)`).
    case didMove(to: FilePath)
    /// The item was deleted; the presenter stays registered on its path (ContainerFS).
    case didDelete
    /// Something appeared at `at` inside the presented directory.
    case subitemDidAppear(at: FilePath)
    /// Something inside the presented directory changed.
    case subitemDidChange(at: FilePath)
    /// Something inside (or into, or out of) the presented directory moved.
    case subitemDidMove(from: FilePath, to: FilePath)
    /// Something inside the presented directory was deleted (ContainerFS).
    case subitemDidDelete(at: FilePath)
    /// Events may have been missed (late answer, queue overflow): re-read everything.
    case resync
}

/// A committed change, announced once by whoever made it; the registry turns it into
/// `PresenterNotification`s for each presenter concerned (docs/SEMANTICS.md §3.6).
public enum PresenterEvent: Sendable, Hashable {
    /// Contents or attributes of the item at the path changed.
    case changed(FilePath)
    /// An item was created at the path.
    case appeared(FilePath)
    /// The item at `from` (and everything inside it) is now at `to`.
    case moved(from: FilePath, to: FilePath)
    /// The item at the path (and everything inside it) was deleted.
    case deleted(FilePath)
    /// Presenters at or inside the path (every presenter when nil) must resynchronise.
    case resync(FilePath?)
}
