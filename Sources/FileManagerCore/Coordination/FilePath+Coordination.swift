import Glibc
import SystemPackage

// Path arithmetic for coordination, on the raw bytes of a `FilePath`: every coordinated
// call normalises its paths, hashes their prefixes and compares them with presenters'
// paths, and going through `FilePath.components` for that costs an allocation per
// component. The results are the same as the component-wise operations, for normalised
// absolute paths.

extension FilePath {
    /// Absolute (relative paths are taken from the working directory) and lexically
    /// normal — no `.`, no `..`, no repeated or trailing `/` — so that equal places compare
    /// equal and prefixes are ancestors. Symbolic links are not resolved; `..` at the root
    /// stays at the root.
    public var coordinationNormalized: FilePath {
        var bytes = normalizedPathBytes()
        bytes.append(0)
        return bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { FilePath(platformString: $0.baseAddress!) }
        }
    }

    /// The bytes of `coordinationNormalized`, without the terminating NUL.
    func normalizedPathBytes() -> [UInt8] {
        withPlatformString { raw -> [UInt8] in
            var source: [UInt8] = []
            if raw.pointee != 0x2F {
                var cwd = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
                if getcwd(&cwd, cwd.count) != nil {
                    source = cwd.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
                }
                source.append(0x2F)
            }
            var p = raw
            while p.pointee != 0 {
                source.append(UInt8(bitPattern: p.pointee))
                p += 1
            }
            var out: [UInt8] = [0x2F]
            out.reserveCapacity(source.count + 1)
            var i = 0
            while i < source.count {
                while i < source.count && source[i] == 0x2F { i += 1 }
                let start = i
                while i < source.count && source[i] != 0x2F { i += 1 }
                let length = i - start
                if length == 0 || (length == 1 && source[start] == 0x2E) { continue }
                if length == 2 && source[start] == 0x2E && source[start + 1] == 0x2E {
                    // Drop the last component (never the root).
                    while out.count > 1 && out.last != 0x2F { out.removeLast() }
                    if out.count > 1 { out.removeLast() }
                    continue
                }
                if out.count > 1 { out.append(0x2F) }
                out.append(contentsOf: source[start..<i])
            }
            return out
        }
    }

    /// For normalised absolute paths: whether `self` is `other` or inside it — the byte
    /// form of `starts(with:)`.
    func isSameOrInside(_ other: FilePath) -> Bool {
        withPlatformString { a in
            other.withPlatformString { b in
                let na = strlen(a), nb = strlen(b)
                guard na >= nb, memcmp(a, b, nb) == 0 else { return false }
                return na == nb || a[nb] == 0x2F || (nb == 1 && b[0] == 0x2F)
            }
        }
    }

    /// For normalised absolute paths: whether `self` is strictly inside `other`.
    func isInside(_ other: FilePath) -> Bool {
        self != other && isSameOrInside(other)
    }

    /// For normalised absolute paths: `self` (which is `from` or inside it) with `from`
    /// replaced by `to` — where an item ends up when `from` moves to `to`.
    func replacingPrefix(_ from: FilePath, with to: FilePath) -> FilePath {
        var rest = self
        _ = rest.removePrefix(from)
        return to.pushing(rest)
    }
}
