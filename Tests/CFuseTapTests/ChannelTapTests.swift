import CFuseTap
import Glibc
import Testing

/// The channel tap's byte patching (DESIGN.md 24, 29, 31), on pipes standing in for /dev/fuse:
/// what the kernel reads of an INIT reply and of OPEN/CREATE replies. The layouts are the
/// kernel's <linux/fuse.h> ABI.
@Suite("Channel tap: what libfuse 3.14 cannot say", .serialized)
struct ChannelTapTests {
    static let killprivV2: UInt32 = 1 << 28
    static let initExt: UInt32 = 1 << 30
    static let passthroughFlags2: UInt32 = 1 << 5   // FUSE_PASSTHROUGH, bit 37
    static let writebackCache: UInt32 = 1 << 16
    static let fopenPassthrough: UInt32 = 1 << 7
    static let fopenKeepCache: UInt32 = 1 << 1
    static let fopenDirectIO: UInt32 = 1 << 0

    /// A pipe: [read end, write end].
    static func pipe() -> (CInt, CInt) {
        var fds: [CInt] = [0, 0]
        #expect(Glibc.pipe(&fds) == 0)
        return (fds[0], fds[1])
    }

    static func put<T>(_ value: T, _ bytes: inout [UInt8], at offset: Int) {
        withUnsafeBytes(of: value) { raw in bytes.replaceSubrange(offset..<offset + raw.count, with: raw) }
    }

    static func load32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        bytes[offset..<offset + 4].reversed().reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// Has the tap read an INIT request (unique 7) offering `flags`/`flags2` from a pipe
    /// whose read end it was told (or not) wants passthrough.
    static func readInit(flags: UInt32, flags2: UInt32, askPassthrough: Bool) {
        var request = [UInt8](repeating: 0, count: 40 + 64)
        put(UInt32(request.count), &request, at: 0)
        put(UInt32(26), &request, at: 4)          // FUSE_INIT
        put(UInt64(7), &request, at: 8)           // unique
        put(UInt32(7), &request, at: 40)          // major
        put(UInt32(40), &request, at: 44)         // minor
        put(flags, &request, at: 52)
        put(flags2, &request, at: 56)
        let (r, w) = pipe()
        defer { cfusetap_forget_session(r); close(r); close(w) }
        if askPassthrough { cfusetap_offer_passthrough(r) }
        #expect(write(w, request, request.count) == request.count)
        var buffer = [UInt8](repeating: 0, count: 4096)
        #expect(cfusetap_read(r, &buffer, buffer.count, nil) == request.count)
    }

    /// Sends `body` after an out header (unique, error) through the tap; what the kernel reads.
    static func reply(unique: UInt64, error: Int32 = 0, _ body: [UInt8]) -> [UInt8] {
        var header = [UInt8](repeating: 0, count: 16)
        put(UInt32(16 + body.count), &header, at: 0)
        put(error, &header, at: 4)
        put(unique, &header, at: 8)
        let (r, w) = pipe()
        defer { cfusetap_forget_session(w); close(r); close(w) }
        var body = body
        let sent = header.withUnsafeMutableBytes { h in
            body.withUnsafeMutableBytes { b in
                var iov = [iovec(iov_base: h.baseAddress, iov_len: h.count), iovec(iov_base: b.baseAddress, iov_len: b.count)]
                return cfusetap_writev(w, &iov, 2, nil)
            }
        }
        #expect(sent == 16 + body.count)
        var out = [UInt8](repeating: 0, count: 16 + body.count)
        #expect(read(r, &out, out.count) == out.count)
        return Array(out[16...])
    }

    @Test func initReplyGetsKillprivAndPassthroughWhenOfferedAndAsked() {
        Self.readInit(flags: Self.killprivV2 | Self.initExt, flags2: Self.passthroughFlags2, askPassthrough: true)
        let out = Self.reply(unique: 7, [UInt8](repeating: 0, count: 64))
        #expect(Self.load32(out, 12) == Self.killprivV2 | Self.initExt)
        #expect(Self.load32(out, 32) == Self.passthroughFlags2)
        #expect(Self.load32(out, 36) == 1)  // max_stack_depth
    }

    @Test func initReplyGetsNoPassthroughUnlessAsked() {
        Self.readInit(flags: Self.killprivV2 | Self.initExt, flags2: Self.passthroughFlags2, askPassthrough: false)
        let out = Self.reply(unique: 7, [UInt8](repeating: 0, count: 64))
        #expect(Self.load32(out, 12) == Self.killprivV2)
        #expect(Self.load32(out, 32) == 0)
        #expect(Self.load32(out, 36) == 0)
    }

    @Test func initReplyGetsNoPassthroughBesideAWritebackCache() {
        Self.readInit(flags: Self.initExt, flags2: Self.passthroughFlags2, askPassthrough: true)
        var body = [UInt8](repeating: 0, count: 64)
        Self.put(Self.writebackCache, &body, at: 12)
        let out = Self.reply(unique: 7, body)
        #expect(Self.load32(out, 12) == Self.writebackCache)
        #expect(Self.load32(out, 32) == 0)
    }

    /// The daemon reports the mount live only once INIT was accepted, and fails when libfuse
    /// refused it (`-o max_read=1` did, after `mount` had said the mount was live).
    @Test func howInitWasAnsweredIsRecordedPerSession() {
        let (r, w) = Self.pipe()
        defer { cfusetap_forget_session(w); close(r); close(w) }
        #expect(cfusetap_init_answer(w) == 0)
        Self.readInit(flags: 0, flags2: 0, askPassthrough: false)
        var header = [UInt8](repeating: 0, count: 16)
        Self.put(UInt32(16), &header, at: 0)
        Self.put(Int32(-EPROTO), &header, at: 4)
        Self.put(UInt64(7), &header, at: 8)
        let sent = header.withUnsafeMutableBytes { h in
            var iov = [iovec(iov_base: h.baseAddress, iov_len: h.count)]
            return cfusetap_writev(w, &iov, 1, nil)
        }
        #expect(sent == 16)
        #expect(cfusetap_init_answer(w) == -EPROTO)
        cfusetap_forget_session(w)
        #expect(cfusetap_init_answer(w) == 0)

        var drained = [UInt8](repeating: 0, count: 16)
        #expect(read(r, &drained, 16) == 16)

        Self.readInit(flags: 0, flags2: 0, askPassthrough: false)
        Self.put(UInt32(16 + 64), &header, at: 0)
        Self.put(Int32(0), &header, at: 4)
        var body = [UInt8](repeating: 0, count: 64)
        let accepted = header.withUnsafeMutableBytes { h in
            body.withUnsafeMutableBytes { b in
                var iov = [iovec(iov_base: h.baseAddress, iov_len: h.count), iovec(iov_base: b.baseAddress, iov_len: b.count)]
                return cfusetap_writev(w, &iov, 2, nil)
            }
        }
        #expect(accepted == 16 + 64)
        #expect(cfusetap_init_answer(w) == 1)
    }

    @Test func openAndCreateRepliesCarryTheBackingIDOnlyWhileNamed() {
        var open = [UInt8](repeating: 0, count: 16)
        Self.put(UInt64(0xfeed), &open, at: 0)
        Self.put(Self.fopenDirectIO, &open, at: 8)
        cfusetap_reply_passthrough(42)
        let patched = Self.reply(unique: 9, open)
        let create = Self.reply(unique: 10, [UInt8](repeating: 0xee, count: 128) + open)
        cfusetap_reply_passthrough(0)
        #expect(Array(patched[0..<8]) == Array(open[0..<8]))  // fh untouched
        #expect(Self.load32(patched, 8) == Self.fopenDirectIO | Self.fopenPassthrough)
        #expect(Self.load32(patched, 12) == 42)
        #expect(Array(create[0..<128]) == [UInt8](repeating: 0xee, count: 128))  // entry untouched
        #expect(Self.load32(create, 136) == Self.fopenDirectIO | Self.fopenPassthrough)
        #expect(Self.load32(create, 140) == 42)
        #expect(Self.reply(unique: 11, open) == open)  // no longer named: as libfuse wrote it
    }

    @Test func aPassedThroughOpenLosesFlagsTheKernelRejectsBesideIt() {
        var open = [UInt8](repeating: 0, count: 16)
        Self.put(Self.fopenKeepCache | Self.fopenDirectIO, &open, at: 8)
        cfusetap_reply_passthrough(5)
        let patched = Self.reply(unique: 12, open)
        cfusetap_reply_passthrough(0)
        #expect(Self.load32(patched, 8) == Self.fopenDirectIO | Self.fopenPassthrough)
    }

    /// One descriptor both ways, as /dev/fuse is: a FIFO opened for reading and writing.
    static func fifo() -> CInt {
        let path = "/tmp/cfusetap-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        #expect(mkfifo(path, 0o600) == 0)
        let fd = open(path, O_RDWR)
        unlink(path)
        #expect(fd >= 0)
        return fd
    }

    /// INIT through a session that asked for an io_uring transport (DESIGN.md 31): the
    /// reply's flags and flags2 (FUSE_OVER_IO_URING, bit 41, if the kernel offered it). The
    /// ring, seeing no FUSE device behind the FIFO, starts no queue (a registration the
    /// kernel refused would end the session, here the test runner).
    static func initWithRing(offered: Bool) -> (flags: UInt32, flags2: UInt32) {
        let fd = fifo()
        defer { close(fd) }
        var error: CInt = 0
        let ring = cfusetap_ring_new(1, 1 << 20, { _, _, _ in }, nil, &error)
        #expect(ring != nil && error == 0)
        if let ring { cfusetap_ring_attach(ring, fd) }
        var request = [UInt8](repeating: 0, count: 40 + 64)
        put(UInt32(request.count), &request, at: 0)
        put(UInt32(26), &request, at: 4)
        put(UInt64(21), &request, at: 8)
        put(UInt32(7), &request, at: 40)
        put(UInt32(41), &request, at: 44)
        put(initExt, &request, at: 52)
        put(offered ? uringFlags2 : 0, &request, at: 56)
        #expect(write(fd, request, request.count) == request.count)
        var buffer = [UInt8](repeating: 0, count: 4096)
        #expect(cfusetap_read(fd, &buffer, buffer.count, nil) == request.count)
        var header = [UInt8](repeating: 0, count: 16)
        put(UInt32(16 + 64), &header, at: 0)
        put(UInt64(21), &header, at: 8)
        var body = [UInt8](repeating: 0, count: 64)
        let sent = header.withUnsafeMutableBytes { h in
            body.withUnsafeMutableBytes { b in
                var iov = [iovec(iov_base: h.baseAddress, iov_len: h.count), iovec(iov_base: b.baseAddress, iov_len: b.count)]
                return cfusetap_writev(fd, &iov, 2, nil)
            }
        }
        #expect(sent == 80)
        var out = [UInt8](repeating: 0, count: 80)
        #expect(read(fd, &out, out.count) == out.count)
        cfusetap_ring_stop(ring)
        return (load32(out, 16 + 12), load32(out, 16 + 32))
    }

    static let uringFlags2: UInt32 = 1 << 9   // FUSE_OVER_IO_URING, bit 41

    @Test func initReplyTakesTheRingWhenOfferedAndAsked() {
        let (flags, flags2) = Self.initWithRing(offered: true)
        #expect(flags == Self.initExt)
        #expect(flags2 == Self.uringFlags2)
    }

    @Test func initReplyLeavesTheRingWhenTheKernelDoesNotOfferIt() {
        let (flags, flags2) = Self.initWithRing(offered: false)
        #expect(flags == 0)
        #expect(flags2 == 0)
    }

    @Test func anErrorReplyGoesOutUntouchedWhileABackingIsNamed() {
        cfusetap_reply_passthrough(7)
        let out = Self.reply(unique: 13, error: -EIO, [UInt8](repeating: 0x11, count: 16))
        cfusetap_reply_passthrough(0)
        #expect(out == [UInt8](repeating: 0x11, count: 16))
    }
}
