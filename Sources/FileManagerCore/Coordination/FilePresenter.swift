import Dispatch
import SystemPackage

/// An object that presents an item to a user and takes part in coordination: Apple's
/// NSFilePresenter (docs/SEMANTICS.md §3.6) in Swift form, with paths as
/// `FilePath`, plus ContainerFS's `presentedItemDidDelete`, `presentedSubitemDidDelete(at:)`
/// and `presentedItemNeedsResync`.
///
/// Every member has a default implementation, so a presenter implements what it cares
/// about. The registry calls members on the presenter's own serial queue (one per
/// registration, targeting `presentedItemOperationQueue` when given), in commit order.
///
/// Before an access, the registry sends one `handle(_:reply:)` per presenter; its default
/// runs `savePresentedItemChanges` → `accommodatePresentedItemDeletion` (or the subitem
/// form) → `relinquishPresentedItem(toReader:/toWriter:)` as the request's steps say, each
/// step after the previous one's completion handler (on whatever thread that handler is
/// called). A proxy for a presenter in another process (the daemon's control socket)
/// overrides the two `handle` members instead and forwards them.
///
/// Presenters must be registered (`PresenterRegistry.add`, `FileCoordinator.addFilePresenter`)
/// to be asked or told anything, and removed before they go away.
public protocol FilePresenter: AnyObject, Sendable {
    /// The presented item; nil until one exists . Read at registration; afterwards
    /// the registry follows moves itself and reports them through `presentedItemDidMove`.
    var presentedItemURL: FilePath? { get }
    /// Where the presenter's messages run (serially). Nil: a private serial queue.
    var presentedItemOperationQueue: DispatchQueue? { get }

    /// Someone will read the item: stop writing, call `reader` (with a reacquirer to be
    /// told when the read ends) once it may go ahead.
    func relinquishPresentedItem(toReader reader: @escaping @Sendable (_ reacquirer: (@Sendable () -> Void)?) -> Void)
    /// Someone will write the item: stop using it, call `writer` once it may go ahead.
    func relinquishPresentedItem(toWriter writer: @escaping @Sendable (_ reacquirer: (@Sendable () -> Void)?) -> Void)
    /// Save unsaved changes now (the save may itself be a coordinated write: R8 lets it
    /// through), then call the handler with nil or the error that fails the access.
    func savePresentedItemChanges(completionHandler: @escaping @Sendable ((any Error)?) -> Void)
    /// The item is about to be deleted: close it, then call the handler.
    func accommodatePresentedItemDeletion(completionHandler: @escaping @Sendable ((any Error)?) -> Void)
    /// An item inside the presented package is about to be deleted.
    func accommodatePresentedSubitemDeletion(at url: FilePath, completionHandler: @escaping @Sendable ((any Error)?) -> Void)

    /// The item moved to `newURL` (the registry already presents it there).
    func presentedItemDidMove(to newURL: FilePath)
    /// The item's contents or attributes changed.
    func presentedItemDidChange()
    /// An item appeared inside the presented directory.
    func presentedSubitemDidAppear(at url: FilePath)
    /// An item inside the presented directory changed.
    func presentedSubitemDidChange(at url: FilePath)
    /// An item inside the presented directory moved (within, in or out).
    func presentedSubitem(at oldURL: FilePath, didMoveTo newURL: FilePath)
    /// ContainerFS: the item was deleted; the presenter stays registered on the path.
    func presentedItemDidDelete()
    /// ContainerFS: an item inside the presented directory was deleted. Default: forwards
    /// to `presentedSubitemDidChange(at:)`, Apple's nearest message.
    func presentedSubitemDidDelete(at url: FilePath)
    /// ContainerFS: events may have been missed; re-read. Default: `presentedItemDidChange()`.
    func presentedItemNeedsResync()

    /// The whole before-access request (see the type's documentation).
    func handle(_ request: PresenterRequest, reply: @escaping @Sendable (PresenterReply) -> Void)
    /// One after-the-fact notification; the default calls the matching member above.
    func handle(_ notification: PresenterNotification)
}

extension FilePresenter {
    public var presentedItemURL: FilePath? { nil }
    public var presentedItemOperationQueue: DispatchQueue? { nil }

    public func relinquishPresentedItem(toReader reader: @escaping @Sendable ((@Sendable () -> Void)?) -> Void) { reader(nil) }
    public func relinquishPresentedItem(toWriter writer: @escaping @Sendable ((@Sendable () -> Void)?) -> Void) { writer(nil) }
    public func savePresentedItemChanges(completionHandler: @escaping @Sendable ((any Error)?) -> Void) { completionHandler(nil) }
    public func accommodatePresentedItemDeletion(completionHandler: @escaping @Sendable ((any Error)?) -> Void) { completionHandler(nil) }
    public func accommodatePresentedSubitemDeletion(at url: FilePath, completionHandler: @escaping @Sendable ((any Error)?) -> Void) {
        completionHandler(nil)
    }

    public func presentedItemDidMove(to newURL: FilePath) {}
    public func presentedItemDidChange() {}
    public func presentedSubitemDidAppear(at url: FilePath) {}
    public func presentedSubitemDidChange(at url: FilePath) {}
    public func presentedSubitem(at oldURL: FilePath, didMoveTo newURL: FilePath) {}
    public func presentedItemDidDelete() {}
    public func presentedSubitemDidDelete(at url: FilePath) { presentedSubitemDidChange(at: url) }
    public func presentedItemNeedsResync() { presentedItemDidChange() }

    public func handle(_ request: PresenterRequest, reply: @escaping @Sendable (PresenterReply) -> Void) {
        PresenterSteps.perform(request.steps, of: request, on: self, reply: reply)
    }

    public func handle(_ notification: PresenterNotification) {
        switch notification {
        case .didChange: presentedItemDidChange()
        case .didMove(let to): presentedItemDidMove(to: to)
        case .didDelete: presentedItemDidDelete()
        case .subitemDidAppear(let at): presentedSubitemDidAppear(at: at)
        case .subitemDidChange(let at): presentedSubitemDidChange(at: at)
        case .subitemDidMove(let from, let to): presentedSubitem(at: from, didMoveTo: to)
        case .subitemDidDelete(let at): presentedSubitemDidDelete(at: at)
        case .resync: presentedItemNeedsResync()
        }
    }
}

extension PresenterSteps {
    /// Runs `steps` on `presenter` in the order save → accommodate → relinquish, each after
    /// the previous one completed, and replies once: refused at the first error, accepted
    /// (with the relinquish's reacquirer) at the end.
    static func perform(_ steps: PresenterSteps, of request: PresenterRequest, on presenter: some FilePresenter,
                        reply: @escaping @Sendable (PresenterReply) -> Void) {
        func next(_ done: PresenterSteps) -> @Sendable ((any Error)?) -> Void {
            { error in
                if let error { reply(.refused(error)) } else { perform(steps.subtracting(done), of: request, on: presenter, reply: reply) }
            }
        }
        if steps.contains(.save) {
            presenter.savePresentedItemChanges(completionHandler: next(.save))
        } else if steps.contains(.accommodateDeletion) {
            presenter.accommodatePresentedItemDeletion(completionHandler: next(.accommodateDeletion))
        } else if steps.contains(.accommodateSubitemDeletion) {
            presenter.accommodatePresentedSubitemDeletion(
                at: request.subitemPath ?? FilePath(), completionHandler: next(.accommodateSubitemDeletion))
        } else if steps.contains(.relinquishToWriter) {
            presenter.relinquishPresentedItem(toWriter: { reply(.accepted(reacquirer: $0)) })
        } else if steps.contains(.relinquishToReader) {
            presenter.relinquishPresentedItem(toReader: { reply(.accepted(reacquirer: $0)) })
        } else {
            reply(.accepted(reacquirer: nil))
        }
    }
}
