import Foundation

/// How listing commands print `--json`: one array of objects with sorted keys, the
/// control protocol's string values made numbers where a field is a number, and null
/// where an optional field is absent.
enum JSONListing {
    static func print(_ items: [[String: String]], numbers: [String], nulls: [String] = [], booleans: [String] = []) throws {
        let rows = items.map { row -> [String: Any] in
            var d: [String: Any] = row
            for key in numbers { d[key] = Int64(row[key] ?? "0") ?? 0 }
            for key in nulls where row[key] == nil { d[key] = NSNull() }
            for key in booleans { d[key] = row[key] == "true" }
            return d
        }
        let data = try JSONSerialization.data(withJSONObject: rows, options: [.sortedKeys])
        FileHandleOutput.standardOutput(String(decoding: data, as: UTF8.self) + "\n")
    }
}
