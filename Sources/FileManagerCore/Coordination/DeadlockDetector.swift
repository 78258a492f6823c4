/// Finds cycles in the wait-for graph between purposes (docs/SEMANTICS.md §3.1).
///
/// Nodes are purposes. A waiting request of P waits for Q when it is blocked by an
/// **explicit** claim Q holds, or queued behind a waiting request that will become such a
/// claim (an explicit request of Q), or behind any waiting request that itself waits for Q.
/// Short `.callback` claims are never the held half of a wait: once granted they end
/// without waiting for anything (docs/SEMANTICS.md §3.1), so FUSE traffic alone never reports a deadlock.
///
/// A purpose stands for everything it holds and waits for (a client whose holder may be
/// waiting for its own other request, as with concurrent intent calls), so a cycle
/// P → … → P means none of its purposes can move: the newest waiter on it fails with
/// EDEADLK, as POSIX `F_SETLKW` fails the request that would complete the cycle.
///
/// Cycles through things the table cannot see — kernel directory locks, a presenter that
/// waits for an access of its own, a thread that waits for another process — are not found
/// here; deadlines are the backstop for those.
enum DeadlockDetector {
    /// Whether the waiter at `index` waits, through the graph, for its own purpose.
    static func closesCycle(_ state: ClaimTableState, waiterAt index: Int) -> Bool {
        let waits = waitsFor(state)
        return reaches(from: waits[index], to: state.waiters[index].purpose, in: graph(state, waits))
    }

    /// The index of the newest waiter that waits for its own purpose, if any.
    static func newestDeadlockedWaiter(_ state: ClaimTableState) -> Int? {
        guard !state.waiters.isEmpty else { return nil }
        let waits = waitsFor(state)
        let edges = graph(state, waits)
        for index in state.waiters.indices.reversed()
        where reaches(from: waits[index], to: state.waiters[index].purpose, in: edges) {
            return index
        }
        return nil
    }

    /// For each waiter (FIFO order), the purposes it waits for: one pass, each waiter
    /// inheriting what the waiters it queues behind wait for.
    private static func waitsFor(_ state: ClaimTableState) -> [[Purpose]] {
        var dependents: [Purpose: [Bool]] = [:]
        var result: [[Purpose]] = []
        result.reserveCapacity(state.waiters.count)
        for i in state.waiters.indices {
            let w = state.waiters[i]
            var purposes: [Purpose] = []
            func add(_ p: Purpose) { if !purposes.contains(p) { purposes.append(p) } }
            for h in state.holders where h.lifetime == .explicit && !h.passes(w.purpose) && h.claims.conflicts(with: w.claims) {
                add(h.purpose)
            }
            for j in 0..<i {
                let e = state.waiters[j]
                guard e.purpose != w.purpose, e.claims.conflicts(with: w.claims) else { continue }
                if dependents[w.purpose] == nil {
                    dependents[w.purpose] = state.waitersDepending(on: w.purpose, upTo: state.waiters.count)
                }
                if dependents[w.purpose]![j] { continue }  // not waited for: see `isBlocked`
                if e.lifetime == .explicit { add(e.purpose) }
                result[j].forEach(add)
            }
            result.append(purposes)
        }
        return result
    }

    private static func graph(_ state: ClaimTableState, _ waits: [[Purpose]]) -> [Purpose: [Purpose]] {
        var edges: [Purpose: [Purpose]] = [:]
        for (i, targets) in waits.enumerated() {
            let from = state.waiters[i].purpose
            for to in targets where !(edges[from]?.contains(to) ?? false) {
                edges[from, default: []].append(to)
            }
        }
        return edges
    }

    /// Depth-first search from `starts` for `target`.
    private static func reaches(from starts: [Purpose], to target: Purpose, in edges: [Purpose: [Purpose]]) -> Bool {
        var seen: Set<Purpose> = []
        var stack = starts
        while let p = stack.popLast() {
            if p == target { return true }
            guard seen.insert(p).inserted else { continue }
            stack.append(contentsOf: edges[p] ?? [])
        }
        return false
    }
}
