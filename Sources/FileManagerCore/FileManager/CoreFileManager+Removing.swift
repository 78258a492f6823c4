import Glibc
import SystemPackage

extension CoreFileManager {
    /// `removeItemAtPath:` (docs/SEMANTICS.md §8.5): removes the item and, for a directory, all it
    /// holds, depth first, with the unfiltered listing (dot-files and `._*` included). Links
    /// are removed, never followed. `.`, `..` and `/` are refused (`invalidArgument`).
    ///
    /// The delegate is asked about each item, a directory before its contents (docs/SEMANTICS.md §8.1). A
    /// declined item stays, and so do its ancestors, without an error. After a failure,
    /// `shouldProceedAfterError` true keeps the item and goes on; false (or no delegate)
    /// throws the error.
    ///
    /// - Returns: false if the delegate declined a directory, true otherwise, declined files
    ///   included (Apple: "YES for a file, NO for a directory").
    @discardableResult
    public func removeItem(at path: FilePath, caller: Caller = .current) throws(FileManagerError) -> Bool {
        try Self.requireRegularName(path)
        let hooks = TreeHooks(manager: self, operation: .remove)
        return try Credentials.asCaller(caller) { () throws(FileManagerError) in
            try Self.withParent(of: path) { dir, name throws(FileManagerError) in
                // The walk counts a vanished item as removed; the top one must exist.
                _ = try Self.attempt(path) { () throws(Errno) in try Self.lstat(dir, name) }
                var outcome = TreeRemoval.Outcome()
                try TreeRemoval.remove(dir, name, at: path, hooks: hooks, outcome: &outcome)
                return !outcome.declinedDirectory
            }
        }
    }
}
