import Foundation

/// Runs a helper program and waits for it.
enum Subprocess {
    /// Its status; what it writes goes where this process's output goes.
    static func run(_ arguments: [String]) throws -> Int32 {
        try run(arguments, capturingErrors: false).status
    }

    /// Runs a helper that leaves nothing running behind it; its status and what it wrote on
    /// stderr (its own reason for a failure, better than any guess of ours).
    static func runCapturingErrors(_ arguments: [String]) throws -> (status: Int32, errors: String) {
        try run(arguments, capturingErrors: true)
    }

    private static func run(_ arguments: [String], capturingErrors: Bool) throws -> (status: Int32, errors: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let errors = capturingErrors ? Pipe() : nil
        if let errors { process.standardError = errors }
        try process.run()
        let data = errors?.fileHandleForReading.readDataToEndOfFile() ?? Data()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
