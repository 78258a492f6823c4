import FileManagerCore
import Synchronization
import SystemPackage

/// A delegate that records every question and answers from rules the test sets.
final class SpyDelegate: FileManagerDelegate {
    struct Log {
        var copies: [(FilePath, FilePath)] = []
        var moves: [(FilePath, FilePath)] = []
        var links: [(FilePath, FilePath)] = []
        var removals: [FilePath] = []
        var errors: [FileManagerError] = []
    }

    /// Sendable note: the log and the answers sit behind a mutex.
    private let state = Mutex<(log: Log, declined: Set<FilePath>, proceedAfterError: Bool)>((Log(), [], false))

    init(declining declined: Set<FilePath> = [], proceedAfterError: Bool = false) {
        state.withLock { $0.declined = declined; $0.proceedAfterError = proceedAfterError }
    }

    var log: Log { state.withLock { $0.log } }

    private func answer(_ path: FilePath, _ record: (inout Log) -> Void) -> Bool {
        state.withLock { s in
            record(&s.log)
            return !s.declined.contains(path)
        }
    }

    func fileManager(_ fm: CoreFileManager, shouldCopyItemAt source: FilePath, to destination: FilePath) -> Bool {
        answer(source) { $0.copies.append((source, destination)) }
    }

    func fileManager(_ fm: CoreFileManager, shouldMoveItemAt source: FilePath, to destination: FilePath) -> Bool {
        answer(source) { $0.moves.append((source, destination)) }
    }

    func fileManager(_ fm: CoreFileManager, shouldLinkItemAt source: FilePath, to destination: FilePath) -> Bool {
        answer(source) { $0.links.append((source, destination)) }
    }

    func fileManager(_ fm: CoreFileManager, shouldRemoveItemAt path: FilePath) -> Bool {
        answer(path) { $0.removals.append(path) }
    }

    func fileManager(_ fm: CoreFileManager, shouldProceedAfterError error: FileManagerError, removingItemAt path: FilePath) -> Bool {
        state.withLock { s in
            s.log.errors.append(error)
            return s.proceedAfterError
        }
    }
}
