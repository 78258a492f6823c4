import Logging

/// The bridge's logger. A module-level constant is fine here: it carries no state of a
/// session, only a label and a level chosen at start-up by the bootstrap.
let bridgeLogger = Logger(label: "containerfs.fuse")
