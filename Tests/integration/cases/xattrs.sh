# user.* extended attributes round-trip through the mount on files and directories:
# set, get (and its size probe), list, replace, remove, XATTR_CREATE/XATTR_REPLACE, binary
# and large values; never ENOSYS. The errnos of the edge cases equal ext4's underneath;
# the kernel's rules for other users hold; setfattr/getfattr (attr) work.
. "$(dirname "$0")/../lib/common.sh"
_users
fs_mount
C=$(_mkcontainer com.example.xattr)
chmod 755 "$C"
REF=$TEST_TMP/ref
mkdir -p "$REF"

"$PY" - "$C/Documents" "$REF" <<'EOF'
import ctypes, os, sys
sys.path.insert(0, os.environ["TEST_LIB"])
from checks import *
D, REF = sys.argv[1], sys.argv[2]

def scenario(root):
    """The same calls on a tree; returns [(step, result)]."""
    out = []
    def run(step, fn, *a, **kw):
        try:
            r = fn(*a, **kw)
            out.append((step, "OK" if r is None else r))
        except OSError as e:
            out.append((step, errno.errorcode[e.errno]))
    import errno
    f = os.path.join(root, "f"); d = os.path.join(root, "d"); l = os.path.join(root, "l")
    write_file(f, b"x"); os.mkdir(d); os.symlink("f", l)
    run("list empty", os.listxattr, f)
    run("get missing", os.getxattr, f, "user.none")
    run("set", os.setxattr, f, "user.a", b"1")
    run("get", os.getxattr, f, "user.a")
    run("set empty value", os.setxattr, f, "user.empty", b"")
    run("get empty value", os.getxattr, f, "user.empty")
    run("replace", os.setxattr, f, "user.a", b"22")
    run("get replaced", os.getxattr, f, "user.a")
    run("XATTR_CREATE existing", os.setxattr, f, "user.a", b"3", os.XATTR_CREATE)
    run("XATTR_REPLACE missing", os.setxattr, f, "user.b", b"3", os.XATTR_REPLACE)
    run("XATTR_CREATE new", os.setxattr, f, "user.b", b"3", os.XATTR_CREATE)
    run("XATTR_REPLACE existing", os.setxattr, f, "user.b", b"4", os.XATTR_REPLACE)
    run("binary value", os.setxattr, f, "user.bin", bytes(range(256)))
    run("get binary", lambda: os.getxattr(f, "user.bin") == bytes(range(256)))
    run("large value", os.setxattr, f, "user.large", b"v" * 3000)
    run("get large", lambda: len(os.getxattr(f, "user.large")))
    run("too large for one block", os.setxattr, f, "user.huge", b"v" * 65536)
    run("name too long", os.setxattr, f, "user." + "n" * 251, b"1")
    run("empty name", os.setxattr, f, "", b"1")
    run("unknown namespace", os.setxattr, f, "bogus.a", b"1")
    run("list", lambda: sorted(os.listxattr(f)))
    run("remove", os.removexattr, f, "user.a")
    run("remove missing", os.removexattr, f, "user.a")
    run("list after remove", lambda: sorted(os.listxattr(f)))
    run("directory set", os.setxattr, d, "user.dir", b"yes")
    run("directory get", os.getxattr, d, "user.dir")
    run("user.* on a symlink itself", os.setxattr, l, "user.a", b"1", follow_symlinks=False)
    run("through a symlink", os.setxattr, l, "user.via", b"1")
    run("target has it", os.getxattr, f, "user.via")
    run("list the symlink itself", os.listxattr, l, follow_symlinks=False)
    run("trusted.* as root", os.setxattr, f, "trusted.t", b"1")
    run("get trusted.*", os.getxattr, f, "trusted.t")
    # Probing the size first (size 0), as getfattr and libattr do.
    libc = ctypes.CDLL(None, use_errno=True)
    run("size probe", lambda: libc.getxattr(os.fsencode(f), b"user.large", None, 0))
    run("buffer too small", lambda: libc.getxattr(os.fsencode(f), b"user.large", ctypes.create_string_buffer(10), 10) if libc.getxattr(os.fsencode(f), b"user.large", ctypes.create_string_buffer(10), 10) >= 0 else errno.errorcode[ctypes.get_errno()])
    run("list size probe", lambda: libc.listxattr(os.fsencode(f), None, 0) > 0)
    return out

mine, theirs = scenario(D), scenario(REF)
for a, b in zip(mine, theirs):
    eq("xattr: " + a[0], a, b)
    true("never ENOSYS: " + a[0], a[1] != "ENOSYS")
done()
EOF

# Survives a remount; the store holds the same attributes.
F=$C/Documents/f
_assert_errno ENODATA fsop getxattr "$F" user.a
_assert_ok setfattr -n user.tool -v hello "$F"
_assert_output "hello" getfattr --absolute-names --only-values -n user.tool "$F"
_assert_output "hello" getfattr --absolute-names --only-values -n user.tool "$TEST_STORE/containers/com.example.xattr/Documents/f"
fs_umount
fs_mount
_assert_output "hello" getfattr --absolute-names --only-values -n user.tool "$F"
_assert_output "user.b user.bin user.empty user.large user.tool user.via" sh -c "getfattr --absolute-names -d -m '^user\\.' '$F' | sed -n 's/=.*//p' | sort | tr '\n' ' ' | sed 's/ \$//'"

# Other users: the kernel's rules (write permission to set, read permission to get).
chmod 644 "$F"
_assert_output "hello" _as_user "$U1" fsop getxattr "$F" user.tool
_assert_errno EACCES _as_user "$U1" fsop setxattr "$F" user.tool x
_assert_errno EACCES _as_user "$U1" fsop removexattr "$F" user.tool
_assert_errno EPERM _as_user "$U1" fsop setxattr "$F" trusted.x 1
chmod 600 "$F"
_assert_errno EACCES _as_user "$U1" fsop getxattr "$F" user.tool
chmod 666 "$F"
_assert_ok _as_user "$U1" fsop setxattr "$F" user.other by-u1
_assert_output "by-u1" fsop getxattr "$F" user.other
# Inside a container the user owns, everything works.
U=$(_as_user "$U1" sh -c "mkdir '$TEST_MNT/containers/org.user.x' && echo '$TEST_MNT/containers/org.user.x'")
_as_user "$U1" sh -c "echo data >'$U/Documents/mine'"
_assert_ok _as_user "$U1" setfattr -n user.k -v v "$U/Documents/mine"
_assert_output "v" _as_user "$U1" getfattr --absolute-names --only-values -n user.k "$U/Documents/mine"
_assert_ok _as_user "$U1" setfattr -x user.k "$U/Documents/mine"
_assert_errno ENODATA _as_user "$U1" fsop getxattr "$U/Documents/mine" user.k
