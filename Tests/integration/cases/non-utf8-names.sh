# Names are bytes: a non-UTF-8 name round-trips through the mount (create, list, stat,
# rename, xattr, unlink) and arrives in the store byte for byte; NFC and NFD spellings
# are two different names; 255 bytes is the limit, counted in bytes (contract test 25).
. "$(dirname "$0")/../lib/common.sh"
fs_mount
C=$(_mkcontainer com.example.names)

"$PY" - "$C/Documents" "$TEST_STORE/containers/com.example.names/Documents" <<'EOF'
import os, subprocess, sys, unicodedata
sys.path.insert(0, os.environ["TEST_LIB"])
from checks import *
D, S = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
def p(n): return os.path.join(D, n)

names = [b"\xff\xfe.txt", b"latin1-caf\xe9", b"\x80", b"trailing\xc3", b"\xed\xa0\x80-surrogate", b"ok-\xe2\x82\xac-euro", b"\x01ctrl", b"\x7f"]
for n in names:
    ok("create %r" % n, write_file, p(n), n)
listed = set(os.listdir(D))
for n in names:
    true("listed %r" % n, n in listed)
    eq("read %r" % n, read_file(p(n)), n)
    true("in the store byte for byte %r" % n, n in set(os.listdir(S)))
eq("stat", os.stat(p(b"\xff\xfe.txt")).st_size, 6)
ok("rename to another non-UTF-8 name", os.rename, p(b"\xff\xfe.txt"), p(b"\xfe\xff.bin"))
err("old name gone", "ENOENT", os.stat, p(b"\xff\xfe.txt"))
eq("new name", read_file(p(b"\xfe\xff.bin")), b"\xff\xfe.txt")
ok("mkdir non-UTF-8", os.mkdir, p(b"dir\xa0"))
ok("file inside it", write_file, os.path.join(p(b"dir\xa0"), b"\xc0\xc1"), b"deep")
eq("deep read", read_file(os.path.join(p(b"dir\xa0"), b"\xc0\xc1")), b"deep")
ok("symlink with a non-UTF-8 target", os.symlink, b"\xfe\xff.bin", p(b"link\x99"))
eq("readlink", os.readlink(p(b"link\x99")), b"\xfe\xff.bin")
eq("read through it", read_file(p(b"link\x99")), b"\xff\xfe.txt")
ok("hard link", os.link, p(b"\xfe\xff.bin"), p(b"hard\x9f"))
ok("xattr on it", os.setxattr, p(b"hard\x9f"), "user.k", b"v")
eq("xattr back", os.getxattr(p(b"\xfe\xff.bin"), "user.k"), b"v")
ok("unlink", os.unlink, p(b"hard\x9f"))

# NFC and NFD are different byte strings: two files.
nfc = unicodedata.normalize("NFC", "café").encode()
nfd = unicodedata.normalize("NFD", "café").encode()
true("the spellings differ", nfc != nfd)
write_file(p(nfc), b"composed")
write_file(p(nfd), b"decomposed")
eq("NFC file", read_file(p(nfc)), b"composed")
eq("NFD file", read_file(p(nfd)), b"decomposed")
eq("both listed", sum(1 for n in os.listdir(D) if n in (nfc, nfd)), 2)

# The limit is 255 bytes, whatever they encode.
ok("255 bytes of 2-byte characters plus one", write_file, p("é".encode() * 127 + b"x"), b"")
err("256 bytes", "ENAMETOOLONG", write_file, p("é".encode() * 128), b"")
err("256 bytes mkdir", "ENAMETOOLONG", os.mkdir, p(b"\xff" * 256))
ok("255 bytes of \\xff", os.mkdir, p(b"\xff" * 255))

# Tools that see bytes: find, ls, tar round-trip the names.
out = subprocess.run(["find", D, "-maxdepth", "1", "-name", b"*\xe9"], capture_output=True).stdout
eq("find matches a latin-1 name", out.strip().split(b"/")[-1], b"latin1-caf\xe9")
done()
EOF
# tar of the directory and back elsewhere keeps every name.
_assert_ok tar -C "$C/Documents" -cf "$TEST_TMP/names.tar" .
mkdir "$TEST_TMP/out"
_assert_ok tar -C "$TEST_TMP/out" -xf "$TEST_TMP/names.tar"
_assert_output "$(cd "$C/Documents" && find . | LC_ALL=C sort | od -c | md5sum)" sh -c "cd '$TEST_TMP/out' && find . | LC_ALL=C sort | od -c | md5sum"
