import SystemPackage

extension PresenterRegistry {
    /// One presenter to ask before an access, and what to ask it.
    struct Ask: Sendable {
        let entry: Entry
        let request: PresenterRequest
    }

    /// The presenters to ask before an access of `claims` by `purpose` (docs/SEMANTICS.md §3.6), each with one
    /// request naming all its steps:
    /// - the target's presenter and the presenters of **every** enclosing package :
    ///   relinquish to reader/writer; save for a read without `withoutChanges` or a write
    ///   `forMerging`; accommodate deletion for `forDeleting`/`forReplacing` (a package
    ///   presenter gets the subitem form, naming the item);
    /// - for a subtree write or read, for an access to a package directory, and for a batch
    ///   (`includingContents`), also every presenter inside the target, with the same steps;
    /// - never the accessor's own purpose (R7), and only presenters of `accessorUID` or
    ///   root's (nil: the accessor is in this process and every presenter counts).
    ///
    /// `alreadyDone` (entry id → steps) removes what an enclosing access or batch of the
    /// same coordinator already asked for, so nested calls ask each presenter once.
    func asks(for claims: [Claim], purpose: Purpose, accessorUID: UInt32?, includingContents: Bool,
              alreadyDone: [UInt64: PresenterSteps] = [:]) -> [Ask] {
        if isEmpty { return [] }
        let list = entries.withLock { $0 }
        refreshUnboundPaths(list)
        var result: [Ask] = []
        for entry in list where entry.purpose != purpose {
            if let uid = accessorUID, entry.uid != uid, entry.uid != 0 { continue }
            guard let chain = chain(of: entry) else { continue }
            var steps: PresenterSteps = []
            var subitemPath: FilePath? = nil
            for claim in claims {
                steps.formUnion(Self.steps(for: claim, presenterChain: chain, includingContents: includingContents,
                                           subitemPath: &subitemPath))
            }
            if let done = alreadyDone[entry.id] { steps = steps.subtracting(done: done) }
            guard !steps.isEmpty else { continue }
            result.append(Ask(entry: entry, request: PresenterRequest(
                steps: steps, subitemPath: subitemPath, requestingPurpose: purpose)))
        }
        return result
    }

    /// The entry's identity chain, resolved once per path.
    private func chain(of entry: Entry) -> [UInt64]? {
        let (path, cached) = entry.state.withLock { ($0.path, $0.chain) }
        if let cached { return cached }
        guard let path else { return nil }
        let chain = resolver.identityChain(for: path)
        entry.state.withLock { st in
            if st.path == path { st.chain = chain }
        }
        return chain
    }

    /// What the presenter whose item has `presenterChain` is asked for `claim`.
    static func steps(for claim: Claim, presenterChain p: [UInt64], includingContents: Bool,
                      subitemPath: inout FilePath?) -> PresenterSteps {
        let target = claim.target
        let t = target.chain
        var base: PresenterSteps
        var deletion = false
        switch claim.access {
        case .reading(let options):
            if options.contains(.immediatelyAvailableMetadataOnly) { return [] }
            base = .relinquishToReader
            if !options.contains(.withoutChanges) { base.insert(.save) }
        case .writing(let options):
            base = .relinquishToWriter
            if options.contains(.forMerging) { base.insert(.save) }
            deletion = !options.isDisjoint(with: CoordinatedWritingOptions.deletionOptions)
        }
        if p.count == t.count {
            guard ClaimTarget.isPrefix(p, p.count, of: t, t.count) else { return [] }
            return deletion ? base.union(.accommodateDeletion) : base
        }
        if p.count < t.count {
            // The presenter's item encloses the target: only a package presenter is asked.
            let index = p.count - 1
            guard index >= 0, index < 64, target.packageMask & (1 << UInt64(index)) != 0,
                  ClaimTarget.isPrefix(p, p.count, of: t, t.count) else { return [] }
            if deletion {
                if subitemPath == nil { subitemPath = claim.path }
                return base.union(.accommodateSubitemDeletion)
            }
            return base
        }
        // The presenter's item is inside the target.
        guard claim.mode == .subtreeWrite || claim.mode == .subtreeRead || target.isPackage || includingContents,
              ClaimTarget.isPrefix(t, t.count, of: p, p.count) else { return [] }
        return deletion ? base.union(.accommodateDeletion) : base
    }
}
