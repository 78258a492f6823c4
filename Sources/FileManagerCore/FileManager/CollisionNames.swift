import Glibc
import SystemPackage

/// How a taken name is made free, wherever ContainerFS picks a name for the user (a trashed
/// item, a delivered file, a wrapper's child): `.2`, `.3`, … inserted before the first dot
/// that follows the name's leading dots (so the extension stays and a dot-file stays
/// hidden), or appended when there is none: `a.tar.gz`, `a.2.tar.gz`; `.profile.2`;
/// `README.2`. Deterministic, as GLib names collisions.
public enum CollisionNames {
    /// How many candidates are tried before giving up (EEXIST).
    public static let limit = 10_000

    /// The `n`th candidate for `name` (1: the name itself), cut to `maximumLength` bytes:
    /// the part before the number first, then (a name that is nearly all extension) the rest.
    public static func candidate(_ name: [UInt8], _ n: Int, maximumLength: Int = 255) -> [UInt8] {
        let start = name.firstIndex { $0 != 0x2E } ?? name.endIndex
        let dot = name[start...].firstIndex(of: 0x2E) ?? name.endIndex
        var stem = Array(name[..<dot])
        var rest = Array(name[dot...])
        let number: [UInt8] = n > 1 ? Array(".\(n)".utf8) : []
        let over = stem.count + number.count + rest.count - maximumLength
        if over > 0 {
            let fromStem = min(over, max(stem.count - 1, 0))
            stem.removeLast(fromStem)
            if over > fromStem { rest.removeLast(min(over - fromStem, rest.count)) }
        }
        stem.append(contentsOf: number)
        stem.append(contentsOf: rest)
        return stem
    }

    /// The same for a path component.
    public static func candidate(_ name: FilePath.Component, _ n: Int) -> FilePath.Component {
        guard n > 1 else { return name }
        var bytes = candidate(Bytes.of(name), n).map { CChar(bitPattern: $0) }
        bytes.append(0)
        return bytes.withUnsafeBufferPointer { FilePath.Component(platformString: $0.baseAddress!) } ?? name
    }
}
