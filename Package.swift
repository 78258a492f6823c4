// swift-tools-version: 6.0
//
// ContainerFS: app containers, a trash and published snapshots as one FUSE mount.
//
// Dependencies run one way only (docs/DESIGN.md, decision 1):
//
//   containerfs (CLI) ──► FUSEBridge ──► CFuse (libfuse3, C), CFuseTap (channel I/O, C)
//          │                  │
//          └──────────────────┴──► FileManagerCore ──► CSQLite (libsqlite3, C), CArchive (libarchive, C)
//
// FileManagerCore never imports CFuse: everything it knows is POSIX and Apple's
// file-manager vocabulary. FUSEBridge is the only importer of CFuse and only translates.
import PackageDescription

let package = Package(
    name: "ContainerFS",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "containerfs", targets: ["containerfs"]),
        .library(name: "FileManagerCore", targets: ["FileManagerCore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // MARK: C modules (system libraries found through pkg-config)
        .systemLibrary(
            name: "CFuse",
            pkgConfig: "fuse3",
            providers: [.apt(["libfuse3-dev"])]
        ),
        .systemLibrary(
            name: "CArchive",
            pkgConfig: "libarchive",
            providers: [.apt(["libarchive-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),

        // Linux calls Swift cannot import directly (variadic syscall/prctl/ioctl).
        .target(name: "CLinux"),

        // The bridge's own /dev/fuse I/O: plain read/writev plus a look at the wire for
        // what libfuse 3.14 cannot negotiate (FUSE_HANDLE_KILLPRIV_V2, DESIGN.md 24).
        .target(name: "CFuseTap"),

        // MARK: The core: containers, policy, store, file-manager operations
        .target(
            name: "FileManagerCore",
            dependencies: [
                "CSQLite",
                "CArchive",
                "CLinux",
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // MARK: The kernel adapter: libfuse low-level callbacks -> core calls
        .target(
            name: "FUSEBridge",
            dependencies: [
                "CFuse",
                "CFuseTap",
                "FileManagerCore",
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // MARK: The command-line tool
        .executableTarget(
            name: "containerfs",
            dependencies: [
                "FUSEBridge",
                "FileManagerCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // MARK: Tests (never mount; mounted behaviour lives in Tests/integration)
        .testTarget(
            name: "FileManagerCoreTests",
            dependencies: [
                "FileManagerCore",
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .testTarget(
            name: "FUSEBridgeTests",
            dependencies: ["FUSEBridge"]
        ),
        .testTarget(
            name: "CFuseTapTests",
            dependencies: ["CFuseTap"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
