import CLinux

// Linux flags that Swift's Glibc module leaves out (they sit behind _GNU_SOURCE).
public let O_PATH: CInt = clinux_O_PATH
public let O_DIRECT: CInt = clinux_O_DIRECT
public let O_NOATIME: CInt = clinux_O_NOATIME
public let O_TMPFILE: CInt = clinux_O_TMPFILE
public let RENAME_NOREPLACE: UInt32 = clinux_RENAME_NOREPLACE
public let RENAME_EXCHANGE: UInt32 = clinux_RENAME_EXCHANGE
public let RENAME_WHITEOUT: UInt32 = clinux_RENAME_WHITEOUT
public let UTIME_NOW: Int = clinux_UTIME_NOW
public let UTIME_OMIT: Int = clinux_UTIME_OMIT
