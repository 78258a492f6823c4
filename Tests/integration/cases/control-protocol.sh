# The control socket (docs/CONTROL-PROTOCOL.md): malformed, mis-versioned, unknown and
# oversized requests get an error answer and never wedge the daemon; peer credentials decide
# what a user may present (only items the user may read) and list (only their own presenters).
. "$(dirname "$0")/../lib/common.sh"
_users
_assert_ok containerfs container create com.example.notes --store "$TEST_STORE"
_assert_ok containerfs container create org.example.mine --store "$TEST_STORE"
chown -R "$U1_UID:$U1_GID" "$TEST_STORE/containers/org.example.mine"
fs_mount
SOCK=$TEST_STORE/control.sock

# MARK: bad input is answered, and the daemon keeps serving
out=$("$PY" - "$SOCK" <<'PYEOF'
import json, socket, sys
def conn():
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(10); return s
def line(s):
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk: return None
        buf += chunk
    return json.loads(buf)
s = conn()
for raw in [b"garbage\n", b'{"v":2,"id":5,"op":"status","args":{}}\n', b'{"v":1,"id":6,"op":"nope","args":{}}\n']:
    s.sendall(raw); r = line(s); print(r["ok"], r.get("errno"), r.get("id"))
s.sendall(b'{"v":1,"id":7,"op":"status","args":{}}\n'); r = line(s); print(r["ok"], r["id"], "mountPoint" in r["result"])
big = conn(); big.sendall(b"x" * 70000); r = line(big); print(r["ok"], r["errno"]); print(line(big))
s2 = conn(); s2.sendall(b'{"v":1,"id":1,"op":"status","args":{}}\n'); print(line(s2)["ok"])
PYEOF
)
_assert_eq $'False 22 0\nFalse 71 5\nFalse 22 6\nTrue 7 True\nFalse 90\nNone\nTrue' "$out" "answers to bad requests, then service as usual"

# MARK: `args` may be left out (status takes none); errors name the wrong field; paths that
# climb out of the mount are refused for claims and presenters alike
out=$("$PY" - "$SOCK" <<'PYEOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(10); f = s.makefile()
def ask(raw):
    s.sendall(raw + b"\n"); r = json.loads(f.readline())
    print(r["id"], r["ok"], r.get("errno"), r.get("error"))
ask(b'{"v":1,"id":1,"op":"status"}')
ask(b'{"v":1,"op":"status"}')
ask(b'{"v":1,"id":3}')
ask(b'{"v":1,"id":"4","op":"status"}')
ask(b'{"v":1,"id":5,"op":"claim","args":{"path":"containers","mode":1}}')
ask(b'{"v":1,"id":6,"op":"claim","args":{"path":"containers/org.example.mine"}}')
ask(b'{"v":1,"id":7,"op":"claim","args":{"path":"../../etc/passwd","mode":"read"}}')
ask(b'{"v":1,"id":8,"op":"presenter.register","args":{"path":"containers/../../etc/passwd"}}')
ask(b'{"v":1,"id":9,"op":"frobnicate"}')
PYEOF
)
_assert_eq "1 True None None
0 False 22 malformed request: id: missing
3 False 22 malformed request: op: missing
0 False 22 malformed request: id: expected an integer
5 False 22 malformed request: args.mode: expected a string (args values are strings)
6 False 22 mode: missing (read or write): invalid argument
7 False 22 path: ../../etc/passwd: '..' leads outside the mount: invalid argument
8 False 22 path: containers/../../etc/passwd: '..' leads outside the mount: invalid argument
9 False 22 op: unknown operation 'frobnicate' (docs/CONTROL-PROTOCOL.md)" "$out" "args optional, errors name the field, '..' refused"

# MARK: a claim's timeout out of range is EINVAL, from any user: it once trapped the daemon
# (Int(inf)), leaving a dead mount; the CLI refuses it before asking
timeouts() {
    "$PY" - "$SOCK" <<'PYEOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(10)
f = s.makefile()
for i, t in enumerate(["1e300", "inf", "nan", "-1", "1e10", "0.5"]):
    s.sendall((json.dumps({"v": 1, "id": i, "op": "claim", "args": {"path": "containers/org.example.mine/Documents", "mode": "read", "timeout": t}}) + "\n").encode())
    r = json.loads(f.readline())
    print(t, r["ok"], r.get("errno"))
PYEOF
}
_assert_eq $'1e300 False 22\ninf False 22\nnan False 22\n-1 False 22\n1e10 False 22\n0.5 True None' \
    "$(_as_user "$U1" bash -c "$(declare -f timeouts); PY=$PY SOCK=$SOCK timeouts")" "timeouts out of range"
_assert_output "dir" fsop stat "$TEST_MNT/containers" type
_assert_exit 2 containerfs coordinate --read --timeout 1e300 "$TEST_MNT/containers/com.example.notes/Documents" -- true
[[ $_OUT == *"--timeout"*"expects a number of seconds from 0 to 1000000000"* ]] || _fail "coordinate --timeout 1e300: $_OUT"

# MARK: presenters by peer credentials
register() {   # register PATH: registers over the socket as the calling user; prints ok/errno
    "$PY" - "$SOCK" "$1" <<'PYEOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(10)
s.sendall((json.dumps({"v": 1, "id": 1, "op": "presenter.register", "args": {"path": sys.argv[2]}}) + "\n").encode())
r = json.loads(s.makefile().readline())
s.sendall(b'{"v":1,"id":2,"op":"presenter.list","args":{}}\n')
l = json.loads(s.makefile().readline())
print("ok" if r["ok"] else "errno %d" % r["errno"], len(l.get("items") or []))
PYEOF
}
# The root-owned container is 0700: another user may not present what is in it.
_assert_eq "errno 13 0" "$(_as_user "$U1" bash -c "$(declare -f register); PY=$PY SOCK=$SOCK register containers/com.example.notes/Documents")" \
    "a user cannot present an item they cannot read"
_assert_eq "ok 1" "$(_as_user "$U1" bash -c "$(declare -f register); PY=$PY SOCK=$SOCK register containers/org.example.mine/Documents/not-yet")" \
    "a user presents their own (not yet existing) item and lists only it"
_assert_eq "ok 1" "$(register containers/com.example.notes/Documents)" "root presents anything"
