/// A claim the table has granted. It lasts until `release()`; releasing is idempotent, so
/// every path out of an operation may release without tracking whether another did.
///
/// A value, not an object, so that the fast path allocates nothing: the table finds the
/// claim by `id`, and a second release finds nothing.
public struct ClaimGrant: Sendable, Hashable {
    /// Unique within its table (the same number as the request's `ClaimTicket`).
    public let id: UInt64
    let table: ClaimTable

    /// Gives the claim up. Waiters it was blocking are granted before this returns, and
    /// their completions run on this thread (after the table's lock is dropped).
    public func release() { table.release(id) }

    public static func == (a: ClaimGrant, b: ClaimGrant) -> Bool { a.id == b.id && a.table === b.table }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }
}

/// Names a request while it may still be waiting, so that it can be cancelled
/// (`ClaimTable.cancel(_:)`, e.g. on FUSE_INTERRUPT).
public struct ClaimTicket: Sendable, Hashable {
    public let id: UInt64
    public init(id: UInt64) { self.id = id }
}
