import Dispatch
import Glibc
import Synchronization
import SystemPackage
import Testing
@testable import FileManagerCore

/// All coordination suites nest in this one so that they run one at a time: their
/// deadlines are short and the machine may have two cores.
@Suite("Coordination", .serialized)
struct CoordinationTests {}

// MARK: - Targets and claims

enum Fixture {
    /// The chain `PathClaimResolver` gives `path`.
    static func chain(_ path: String) -> [UInt64] {
        PathClaimResolver.chain(of: FilePath(path).coordinationNormalized)
    }

    /// A target for `path`; `packages` are the paths of enclosing (or the item's own)
    /// package directories.
    static func target(_ path: String, directory: Bool = false, packages: [String] = []) -> ClaimTarget {
        let indices = packages.map { FilePath($0).coordinationNormalized.components.count }
        return ClaimTarget(chain: chain(path), isDirectory: directory, packageIndices: indices)
    }

    static func read(_ path: String, directory: Bool = false, packages: [String] = []) -> Claim {
        Claim(target: target(path, directory: directory, packages: packages), reading: [], path: FilePath(path))
    }

    static func write(_ path: String, _ options: CoordinatedWritingOptions = [], directory: Bool = false,
                      packages: [String] = []) -> Claim {
        Claim(target: target(path, directory: directory, packages: packages), writing: options, path: FilePath(path))
    }

    /// A private center with deadlines that end a broken test instead of hanging it.
    static func center(claimTimeout: Duration? = .seconds(20), presenterTimeout: Duration = .seconds(10),
                       batchTimeout: Duration = .seconds(10), maximumPresenterMisses: Int = 3) -> CoordinationCenter {
        CoordinationCenter(configuration: .init(claimTimeout: claimTimeout, presenterTimeout: presenterTimeout,
                                                batchTimeout: batchTimeout, maximumPresenterMisses: maximumPresenterMisses))
    }
}

// MARK: - Waiting without sleeping

/// Collects claim-table completions and lets the test wait for them.
final class GrantBox: Sendable {
    private let results = Mutex<[Result<ClaimGrant, CoordinationError>]>([])
    private let arrived = DispatchSemaphore(value: 0)

    var completion: ClaimTable.Completion {
        { result in
            self.results.withLock { $0.append(result) }
            self.arrived.signal()
        }
    }

    var all: [Result<ClaimGrant, CoordinationError>] { results.withLock { $0 } }
    var count: Int { results.withLock { $0.count } }

    /// The first result, waiting up to `seconds` for it.
    func wait(_ seconds: Double = 10) -> Result<ClaimGrant, CoordinationError>? {
        if let first = results.withLock({ $0.first }) { return first }
        guard arrived.wait(timeout: .now() + seconds) == .success else { return nil }
        arrived.signal()
        return results.withLock { $0.first }
    }

    /// The grant, waiting up to `seconds` for the answer; nil if refused or still waiting.
    func granted(_ seconds: Double = 10) -> ClaimGrant? {
        if case .success(let g)? = wait(seconds) { return g }
        return nil
    }

    var grant: ClaimGrant? {
        if case .success(let g)? = results.withLock({ $0.first }) { return g }
        return nil
    }

    var error: CoordinationError? {
        if case .failure(let e)? = results.withLock({ $0.first }) { return e }
        return nil
    }
}

/// An append-only list of strings a test can wait on, each with the time it was appended.
final class EventLog: Sendable {
    private let entries = Mutex<[(entry: String, at: ContinuousClock.Instant)]>([])
    private let changed = DispatchSemaphore(value: 0)

    func append(_ entry: String) {
        let now = ContinuousClock.now
        entries.withLock { $0.append((entry, now)) }
        changed.signal()
    }

    var all: [String] { entries.withLock { $0.map(\.entry) } }

    func count(_ entry: String) -> Int { all.filter { $0 == entry }.count }

    /// When `entry` was first appended; nil if it never was.
    func time(of entry: String) -> ContinuousClock.Instant? {
        entries.withLock { $0.first { $0.entry == entry }?.at }
    }

    /// Waits until `condition` holds for the entries (true) or `seconds` pass (false).
    @discardableResult
    func wait(_ seconds: Double = 10, until condition: ([String]) -> Bool) -> Bool {
        let end = DispatchTime.now() + seconds
        while true {
            if condition(all) { return true }
            if changed.wait(timeout: end) == .timedOut { return condition(all) }
        }
    }

    @discardableResult
    func wait(_ seconds: Double = 10, for entry: String) -> Bool {
        wait(seconds) { $0.contains(entry) }
    }
}

/// Runs `body` on a thread of its own (a private serial queue: libdispatch gives each a
/// thread when the others are blocked, which the width-limited global queue would not).
@discardableResult
func spawn(_ body: @escaping @Sendable () -> Void) -> DispatchSemaphore {
    let done = DispatchSemaphore(value: 0)
    DispatchQueue(label: "coordination-test-thread").async {
        body()
        done.signal()
    }
    return done
}

extension DispatchSemaphore {
    /// Whether the semaphore was signalled within `seconds`.
    func waited(_ seconds: Double = 10) -> Bool { wait(timeout: .now() + seconds) == .success }
}

/// Polls `condition` (for state with no completion to wait on, such as "a request is now
/// queued"), every millisecond for up to `seconds`.
@discardableResult
func eventually(_ seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let end = DispatchTime.now() + seconds
    while DispatchTime.now() < end {
        if condition() { return true }
        usleep(1000)
    }
    return condition()
}

/// `eventually` for async tests: polls `condition` for up to `seconds`, suspending the task
/// (never blocking its thread) for a millisecond between polls.
func eventuallyAsync(_ seconds: Double = 10, _ condition: () -> Bool) async -> Bool {
    let end = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < end {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return condition()
}

// MARK: - A presenter that records what it hears

final class TestPresenter: FilePresenter {
    struct Behavior {
        /// Fails `savePresentedItemChanges` with this error.
        var saveError: (any Error)?
        /// Blocks inside `savePresentedItemChanges` until signalled (a stopped presenter).
        var holdSave: DispatchSemaphore?
        /// Runs inside `savePresentedItemChanges`, before answering.
        var onSave: (@Sendable () -> Void)?
        /// Never answers `handle(_:reply:)` at all.
        var neverAnswers = false
    }

    let url: FilePath?
    let log = EventLog()
    let behavior: Mutex<Behavior>

    init(_ path: String?, _ behavior: Behavior = Behavior()) {
        self.url = path.map { FilePath($0) }
        self.behavior = Mutex(behavior)
    }

    var presentedItemURL: FilePath? { url }

    func handle(_ request: PresenterRequest, reply: @escaping @Sendable (PresenterReply) -> Void) {
        if behavior.withLock({ $0.neverAnswers }) {
            log.append("ignored")
            return
        }
        PresenterSteps.perform(request.steps, of: request, on: self, reply: reply)
    }

    func relinquishPresentedItem(toReader reader: @escaping @Sendable ((@Sendable () -> Void)?) -> Void) {
        log.append("relinquishToReader")
        reader { self.log.append("reacquire") }
    }

    func relinquishPresentedItem(toWriter writer: @escaping @Sendable ((@Sendable () -> Void)?) -> Void) {
        log.append("relinquishToWriter")
        writer { self.log.append("reacquire") }
    }

    func savePresentedItemChanges(completionHandler: @escaping @Sendable ((any Error)?) -> Void) {
        log.append("save")
        let b = behavior.withLock { ($0.holdSave, $0.onSave, $0.saveError) }
        b.0?.wait()
        b.1?()
        completionHandler(b.2)
    }

    func accommodatePresentedItemDeletion(completionHandler: @escaping @Sendable ((any Error)?) -> Void) {
        log.append("accommodateDeletion")
        completionHandler(nil)
    }

    func accommodatePresentedSubitemDeletion(at url: FilePath, completionHandler: @escaping @Sendable ((any Error)?) -> Void) {
        log.append("accommodateSubitemDeletion \(url)")
        completionHandler(nil)
    }

    func presentedItemDidMove(to newURL: FilePath) { log.append("didMove \(newURL)") }
    func presentedItemDidChange() { log.append("didChange") }
    func presentedSubitemDidAppear(at url: FilePath) { log.append("subitemDidAppear \(url)") }
    func presentedSubitemDidChange(at url: FilePath) { log.append("subitemDidChange \(url)") }
    func presentedSubitem(at oldURL: FilePath, didMoveTo newURL: FilePath) { log.append("subitemDidMove \(oldURL) \(newURL)") }
    func presentedItemDidDelete() { log.append("didDelete") }
    func presentedSubitemDidDelete(at url: FilePath) { log.append("subitemDidDelete \(url)") }
    func presentedItemNeedsResync() { log.append("resync") }
}

// MARK: - Real files, for what the coordinator learns from the file system

/// A temporary directory removed at deinit.
final class CoordinationScratch: Sendable {
    let root: String

    init() {
        var template = Array("/tmp/coordination-tests-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        root = String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
    }

    deinit {
        _ = try? CoreFileManager().removeItem(at: FilePath(root))
    }

    func path(_ relative: String) -> String { root + "/" + relative }

    @discardableResult
    func file(_ relative: String, _ contents: String = "") -> String {
        let p = path(relative)
        write(p, contents)
        return p
    }

    @discardableResult
    func directory(_ relative: String) -> String {
        let p = path(relative)
        mkdir(p, 0o755)
        return p
    }

    func write(_ path: String, _ contents: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        precondition(fd >= 0, "open \(path) failed")
        _ = contents.utf8CString.withUnsafeBufferPointer { Glibc.write(fd, $0.baseAddress!, $0.count - 1) }
        close(fd)
    }

    func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = Glibc.read(fd, &buffer, buffer.count)
        return n < 0 ? nil : String(decoding: buffer[0..<n], as: UTF8.self)
    }

    func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }
}
