# `containerfs run --sandbox [--no-network] ID -- CMD...` confines CMD with bubblewrap: its
# container (through the mount) is its home and the only place it can write; other
# containers, the trash, snapshots and the rest of the mount are not there at all; /usr is
# read-only; the network stays unless --no-network (SPEC §2). As root (no capabilities
# left inside) and as a user, where the kernel lets users make namespaces.
. "$(dirname "$0")/../lib/common.sh"
_users
command -v bwrap >/dev/null || _fail "bwrap is missing (scripts/install-deps.sh installs bubblewrap)"
S=$TEST_STORE M=$TEST_MNT
fs_mount
_assert_ok containerfs container create com.example.notes --store "$S"
_assert_ok containerfs container create com.example.other --store "$S"
C=$M/containers/com.example.notes O=$M/containers/com.example.other
echo secret >"$O/Documents/f"
mkdir -p "$M/.Trash-0"
# The errno of each access, by name, from inside the sandbox (python3 is in /usr).
PROBE='import errno, os, sys
def try_(label, f):
    try:
        f(); print(label, "ok")
    except OSError as e:
        print(label, errno.errorcode[e.errno])
home = os.environ["HOME"]; mnt = sys.argv[1]; other = sys.argv[2]
try_("write-own", lambda: open(home + "/Documents/own.txt", "w").write("mine"))
try_("read-own", lambda: open(home + "/Documents/own.txt").read())
try_("read-other", lambda: open(other + "/Documents/f").read())
try_("write-other", lambda: open(other + "/Documents/new", "w"))
try_("list-other", lambda: os.listdir(other))
try_("trash", lambda: os.listdir(mnt + "/.Trash-0"))
try_("snapshots", lambda: os.listdir(mnt + "/snapshots"))
try_("write-containers", lambda: open(mnt + "/containers/new", "w"))
try_("write-usr", lambda: open("/usr/new", "w"))
try_("write-root", lambda: open("/new", "w"))
try_("write-etc", lambda: open("/etc/new", "w"))
print("containers", " ".join(sorted(os.listdir(mnt + "/containers"))))
print("mount", " ".join(sorted(os.listdir(mnt))))
print("cwd", os.getcwd() == home)'
WANT="write-own ok
read-own ok
read-other ENOENT
write-other ENOENT
list-other ENOENT
trash ENOENT
snapshots ENOENT
write-containers EROFS
write-usr EROFS
write-root EROFS
write-etc EROFS
containers com.example.notes
mount containers
cwd True"

# MARK: as root
_assert_output "$WANT" containerfs run --sandbox --store "$S" com.example.notes -- python3 -c "$PROBE" "$M" "$O"
_assert_output "mine" cat "$C/Documents/own.txt"
_assert_output "secret" cat "$O/Documents/f"
_assert_errno ENOENT fsop stat "$O/Documents/new"
_assert_output "CapEff:	0000000000000000" containerfs run --sandbox --store "$S" com.example.notes -- grep CapEff /proc/self/status
# Status and network.
_assert_exit 5 containerfs run --sandbox --store "$S" com.example.notes -- sh -c 'exit 5'
net() { containerfs run --sandbox "$@" --store "$S" com.example.notes -- sh -c 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | sort | tr "\n" " "'; }
_assert_eq "lo " "$(net --no-network)" "interfaces with --no-network"
HOST=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\n' ' ')
_assert_eq "$HOST" "$(net)" "interfaces with the network kept"

# MARK: as a user, if the kernel lets users make namespaces here
if _as_user "$U1" bwrap --ro-bind / / true 2>/dev/null; then
    _assert_ok _as_user "$U1" containerfs container create org.example.user --store "$S"
    UC=$M/containers/org.example.user
    WANT_U=${WANT/containers com.example.notes/containers org.example.user}
    _assert_output "$WANT_U" _as_user "$U1" containerfs run --sandbox --store "$S" org.example.user -- python3 -c "$PROBE" "$M" "$O"
    _assert_output "mine $U1_UID" sh -c "cat '$UC/Documents/own.txt'; echo ' '\$(stat -c %u '$UC/Documents/own.txt')"
    _assert_exit 1 _as_user "$U1" containerfs run --sandbox --store "$S" com.example.notes -- true
    _assert_eq "containerfs: containers/com.example.notes: only its owner (uid 0) or root may run programs in it: permission denied" "$_OUT" "another's container"
else
    _ok "# users cannot make user namespaces here: the sandbox was tested as root only"
fi
