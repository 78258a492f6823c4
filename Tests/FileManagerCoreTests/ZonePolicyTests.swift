import FileManagerCore
import SystemPackage
import Testing

@Suite("Zone policy (docs/SEMANTICS.md §1)")
struct ZonePolicyTests {
    let c: Zone.ContainerKey = 42
    let other: Zone.ContainerKey = 43

    @Test func childZonesFollowTheLayout() {
        "Documents".withCString { #expect(Zone.container(c).child(named: $0, isDirectory: true, key: 1) == .layout(c, .documents)) }
        "Inbox".withCString { #expect(Zone.layout(c, .documents).child(named: $0, isDirectory: true, key: 1) == .layout(c, .inbox)) }
        "Inbox".withCString { #expect(Zone.layout(c, .documents).child(named: $0, isDirectory: false, key: 1) == .contents(c)) }
        "x".withCString { #expect(Zone.layout(c, .inbox).child(named: $0, isDirectory: false, key: 1) == .inbox(c)) }
        "Notes.app".withCString { #expect(Zone.container(c).child(named: $0, isDirectory: true, key: 1) == .layout(c, .bundle)) }
        "x".withCString { #expect(Zone.bundle(c).child(named: $0, isDirectory: true, key: 1) == .bundle(c)) }
        "Caches".withCString { #expect(Zone.layout(c, .library).child(named: $0, isDirectory: true, key: 1) == .layout(c, .caches)) }
        "anything".withCString { #expect(Zone.containers.child(named: $0, isDirectory: true, key: 7) == .container(7)) }
        "snapshots".withCString { #expect(Zone.root.child(named: $0, isDirectory: true, key: 1) == .snapshots) }
    }

    @Test func readOnlyZonesAnswerEROFS() {
        #expect(errnoOf { try Zone.bundle(c).checkModify() } == .readOnlyFileSystem)
        #expect(errnoOf { try Zone.snapshots.checkModify() } == .readOnlyFileSystem)
        "x".withCString { name in
            #expect(errnoOf { try Zone.layout(c, .bundle).checkCreate(name) } == .readOnlyFileSystem)
        }
        #expect(errnoOf { try Zone.layout(c, .bundle).checkRemove(child: .bundle(c)) } == .readOnlyFileSystem)
        // The bundle directory itself is a standard directory: EACCES before EROFS (docs/SEMANTICS.md §1).
        #expect(errnoOf { try Zone.container(c).checkRemove(child: .layout(c, .bundle)) } == .permissionDenied)
    }

    @Test func inboxAllowsOnlyReadDeleteAndMoveOut() {
        #expect(errnoOf { try Zone.inbox(c).checkModify() } == .permissionDenied)
        "x".withCString { name in
            #expect(errnoOf { try Zone.layout(c, .inbox).checkCreate(name) } == .permissionDenied)
            // out of Inbox: allowed
            #expect(errnoOf { try Zone.checkRename(item: .inbox(c), from: .layout(c, .inbox), to: .layout(c, .documents), replacing: nil, newName: name, exchange: false) } == nil)
            // into and within: refused
            #expect(errnoOf { try Zone.checkRename(item: .contents(c), from: .layout(c, .documents), to: .layout(c, .inbox), replacing: nil, newName: name, exchange: false) } == .permissionDenied)
            #expect(errnoOf { try Zone.checkRename(item: .inbox(c), from: .layout(c, .inbox), to: .layout(c, .inbox), replacing: nil, newName: name, exchange: false) } == .permissionDenied)
        }
        #expect(errnoOf { try Zone.layout(c, .inbox).checkRemove(child: .inbox(c)) } == nil)
    }

    @Test func layoutDirectoriesAreFixed() {
        #expect(errnoOf { try Zone.container(c).checkRemove(child: .layout(c, .documents)) } == .permissionDenied)
        #expect(errnoOf { try Zone.containers.checkRemove(child: .container(c)) } == .permissionDenied)
        "D".withCString { name in
            #expect(errnoOf { try Zone.checkRename(item: .layout(c, .tmp), from: .container(c), to: .container(c), replacing: nil, newName: name, exchange: false) } == .permissionDenied)
            // replacing a layout directory by renaming over it
            #expect(errnoOf { try Zone.checkRename(item: .contents(c), from: .container(c), to: .container(c), replacing: .layout(c, .documents), newName: name, exchange: false) } == .permissionDenied)
        }
        // the container root itself is writable
        "dotfile".withCString { name in #expect(errnoOf { try Zone.container(c).checkCreate(name) } == nil) }
        "Evil.app".withCString { name in #expect(errnoOf { try Zone.container(c).checkCreate(name) } == .permissionDenied) }
    }

    @Test func containersAreSeparateVolumesButTheTrashIsShared() {
        "x".withCString { name in
            #expect(errnoOf { try Zone.checkRename(item: .contents(c), from: .contents(c), to: .contents(other), replacing: nil, newName: name, exchange: false) } == .improperLink)
            #expect(errnoOf { try Zone.checkRename(item: .contents(c), from: .contents(c), to: .trash, replacing: nil, newName: name, exchange: false) } == nil)
            #expect(errnoOf { try Zone.checkRename(item: .trash, from: .trash, to: .contents(other), replacing: nil, newName: name, exchange: false) } == nil)
            #expect(errnoOf { try Zone.checkLink(item: .contents(c), into: .contents(other), name: name) } == .improperLink)
            #expect(errnoOf { try Zone.checkLink(item: .snapshots, into: .contents(c), name: name) } == .improperLink)
            #expect(errnoOf { try Zone.checkLink(item: .inbox(c), into: .contents(c), name: name) } == .permissionDenied)
            #expect(errnoOf { try Zone.checkLink(item: .contents(c), into: .contents(c), name: name) } == nil)
        }
    }

    @Test func theVirtualDirectoriesRefuseMutations() {
        #expect(errnoOf { try Zone.root.checkModify() } == .permissionDenied)
        "x".withCString { name in
            #expect(errnoOf { try Zone.containers.checkCreate(name) } == .permissionDenied)
            #expect(errnoOf { try Zone.root.checkCreate(name) } == .permissionDenied)
        }
    }
}

@Suite("Bundle identifiers")
struct BundleIdentifierTests {
    @Test(arguments: ["com.example.notes", "a.b", "org.gnu-project.x2"])
    func valid(_ raw: String) { #expect(BundleIdentifier(raw) != nil) }

    @Test(arguments: ["", "com", ".com.x", "com..x", "com.x.", "com/x.y", "..", "com.ex ample", "com.exämple",
                      String(repeating: "a.", count: 128) + "a"])
    func invalid(_ raw: String) { #expect(BundleIdentifier(raw) == nil) }

    @Test func bundleNameIsTheLastLabelCapitalised() {
        #expect(BundleIdentifier("com.example.notes")?.bundleDirectoryName == "Notes.app")
        #expect(BundleIdentifier("com.example.notes")?.displayName == "Notes")
    }
}
