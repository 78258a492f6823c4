/// Records that matter only until the store watcher has handled its queue up to their mark:
/// `OwnChanges`' births (a creation's) and departures (a rename's, an unlink's).
///
/// Nothing consumes them, unlike an expected entry, which its echo meets: kept until a
/// table of 50,000 was pruned by age, every create and rename of a storm stayed (up to two
/// departures per rename while the daemon's own echoes wait unhandled: 20,000 for the
/// benchmark's 10,000 renames, for the daemon's life). So once the table reaches `pruneAt`
/// entries, those no unhandled event can need go first (nearly all of them: the watcher
/// handles within milliseconds). The next prune waits until the table has doubled what was
/// left, so that a stalled watcher costs no scan per insertion.
struct MarkTable<Key: Hashable, Value> {
    private var entries: [Key: Value] = [:]
    private var pruneAt = 1_024

    subscript(key: Key) -> Value? { entries[key] }

    var count: Int { entries.count }

    /// Sets `key` to `value`; first, if the table is due, keeps only the entries `needed`
    /// says an unhandled event may still need.
    mutating func set(_ key: Key, _ value: Value, needed: (Value) -> Bool) {
        if entries.count >= pruneAt {
            entries = entries.filter { needed($0.value) }
            pruneAt = max(1_024, entries.count * 2)
        }
        entries[key] = value
    }
}
