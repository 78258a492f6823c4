import ArgumentParser
import FileManagerCore
import Glibc

/// Ends a command with docs/SEMANTICS.md §2's contract: the message (naming the path and the reason)
/// on stderr, exit status 1. Usage errors stay ArgumentParser's (exit status 2).
struct CommandFailure: Error, CustomStringConvertible {
    let description: String

    init(_ message: String) { description = message }
    init(_ error: FileManagerError) { description = error.description }
}

extension ParsableCommand {
    /// Runs `body`, turning any failure into "containerfs: MESSAGE" and exit status 1.
    func failing<R>(_ body: () throws -> R) throws -> R {
        do {
            return try body()
        } catch let error as ExitCode {
            throw error
        } catch let error as CleanExit {
            throw error
        } catch let error as ValidationError {
            // A usage error found while running (a wrong -o value, an invalid id): status 2.
            FileHandleOutput.standardError("containerfs: \(error.message)\n")
            throw ExitCode(2)
        } catch {
            FileHandleOutput.standardError("containerfs: \(error)\n")
            throw ExitCode.failure
        }
    }
}

/// Unbuffered output with write(2): no shared C stdio state to fight over.
enum FileHandleOutput {
    static func standardError(_ text: String) { write(2, text) }
    static func standardOutput(_ text: String) { write(1, text) }

    static func write(_ fd: CInt, _ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            bytes = bytes.dropFirst(n)
        }
    }
}
