# timeout: 150
# The control socket cannot be used to exhaust the daemon (docs/CONTROL-PROTOCOL.md, "Limits";
# DESIGN.md 45): 3,000 connections of one unprivileged user leave the daemon's threads and
# descriptors where they were (64 are accepted, the rest refused with EAGAIN), while another
# user's control requests and file I/O through the mount go on; claims that wait take a
# thread each, at most 8 per user, and never stall the others' requests; idle connections
# and lines left unfinished are dropped after control_timeout, a connection holding a claim
# is not.
. "$(dirname "$0")/../lib/common.sh"
_users
for u in 1 2; do
    id=org.example.u$u
    _assert_ok containerfs container create "$id" --store "$TEST_STORE"
    uid=U${u}_UID gid=U${u}_GID
    chown -R "${!uid}:${!gid}" "$TEST_STORE/containers/$id"
done
fs_mount -o control_timeout=8
PID=$(_daemon_pid)
SOCK=$TEST_STORE/control.sock
threads() { awk '/^Threads:/ { print $2 }' "/proc/$PID/status"; }
fds() { ls "/proc/$PID/fd" | wc -l; }
sockets() { find "/proc/$PID/fd" -lname 'socket:*' | wc -l; }
T0=$(threads) F0=$(fds) S0=$(sockets)
W=$TEST_TMP/u1   # where the users' scripts report
mkdir -m 0777 "$W"
echo "daemon $PID at rest: $T0 threads, $F0 descriptors"

# MARK: a flood of connections from one user
cat >"$W/flood.py" <<'PYEOF'
import json, os, resource, select, socket, sys, time
sock, n, out, go = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 100), hard))
conns = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX); s.connect(sock); conns.append(s)  # blocking: waits out a full backlog
time.sleep(1.5)
accepted, refused, errors = [], 0, set()
for s in conns:
    p = select.poll(); p.register(s, select.POLLIN)
    if not p.poll(0):
        accepted.append(s); continue
    data = s.recv(4096)
    if data:
        m = json.loads(data.split(b"\n")[0]); errors.add((m["errno"], m["error"]))
    refused += 1
with open(out + ".part", "w") as f:
    print("accepted %d refused %d" % (len(accepted), refused), file=f)
    for e in sorted(errors): print("errno %d: %s" % e, file=f)
os.rename(out + ".part", out)
while not os.path.exists(go): time.sleep(0.1)
# the accepted ones, idle since, are closed by the daemon within control_timeout (8 s)
t0, closed = time.time(), 0
for s in accepted:
    s.settimeout(max(0.1, 20 - (time.time() - t0)))
    try:
        if s.recv(1) == b"": closed += 1
    except socket.timeout: pass
with open(out + ".idle", "w") as f: print("idle-closed %d of %d" % (closed, len(accepted)), file=f)
PYEOF
_as_user "$U1" "$PY" "$W/flood.py" "$SOCK" 3000 "$W/flood.out" "$W/flood.go" &
FLOOD=$!
_wait_for 60 test -e "$W/flood.out" || _fail "the flood never reported"
T1=$(threads) F1=$(fds)
echo "holding $(head -1 "$W/flood.out"): $T1 threads, $F1 descriptors"
_assert_eq "accepted 64 refused 2936
errno 11: too many control connections for uid $U1_UID (limit 64); close some and retry" "$(cat "$W/flood.out")" "one user's connections are capped"
((T1 <= T0 + 1)) || _fail "threads grew from $T0 to $T1 under 3,000 connections"
((F1 <= F0 + 64 + 4)) || _fail "descriptors grew from $F0 to $F1 under 3,000 connections"

# another user is served meanwhile: control requests, and files through the mount
status_of() {
    "$PY" - "$1" <<'PYEOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])
s.sendall(b'{"v":1,"id":3,"op":"status"}\n')
r = json.loads(s.makefile().readline()); print(r["ok"], r["id"], r["result"]["pid"])
PYEOF
}
_assert_eq "True 3 $PID" "$(_as_user "$U2" bash -c "$(declare -f status_of); PY=$PY status_of $SOCK")" "another user's status request"
D2=$TEST_MNT/containers/org.example.u2/Documents
_assert_eq "served" "$(_as_user "$U2" sh -c "echo served >'$D2/f' && cat '$D2/f'")" "another user's I/O through the mount"
touch "$W/flood.go"
wait $FLOOD || _fail "the flood script failed"
_assert_eq "idle-closed 64 of 64" "$(cat "$W/flood.out.idle")" "idle connections closed after control_timeout"
# (the mount's own descriptors may have grown with the other user's files: sockets counted)
_wait_for 10 eval '(($(sockets) == S0))' || _fail "sockets stayed at $(sockets) (at rest: $S0)"

# MARK: waiting claims: a thread each, at most 8 per user; the others are answered at once
cat >"$W/claims.py" <<'PYEOF'
import json, os, socket, sys, time
sock, path, out = sys.argv[1], sys.argv[2], sys.argv[3]
def conn():
    s = socket.socket(socket.AF_UNIX); s.settimeout(30); s.connect(sock); return s
def ask(s, i, op, **args):
    s.sendall((json.dumps({"v": 1, "id": i, "op": op, "args": args}) + "\n").encode())
def answer(s):
    return json.loads(s.makefile().readline())
# The write claim is held by another process: one process's claims never block each other.
granted_r, granted_w = os.pipe(); release_r, release_w = os.pipe()
if os.fork() == 0:
    holder = conn(); ask(holder, 1, "claim", path=path, mode="write"); assert answer(holder)["ok"]
    os.write(granted_w, b"1"); os.read(release_r, 1)
    ask(holder, 3, "release", claim="1"); answer(holder); os._exit(0)
os.read(granted_r, 1)
waiters = [conn() for _ in range(10)]
for i, w in enumerate(waiters): ask(w, 10 + i, "claim", path=path, mode="read", timeout="60")
time.sleep(1)
# a status request while 8 claims wait is answered at once: nothing waits in the loop
t0 = time.time(); s = conn(); ask(s, 2, "status"); r = answer(s)
quick = r["ok"] and time.time() - t0 < 1
refused = []
for w in waiters:
    w.settimeout(0.5)
    try: refused.append(answer(w))
    except (socket.timeout, ValueError): pass
with open(out, "w") as f:
    print("status answered at once:", quick, file=f)
    for r in refused: print("refused errno %d: %s" % (r["errno"], r["error"]), file=f)
open(out + ".ready", "w").close()
while not os.path.exists(out + ".go"): time.sleep(0.1)
os.write(release_w, b"1")
granted = 0
for w in waiters:
    w.settimeout(10)
    try:
        r = answer(w)
        granted += r["ok"]
    except (socket.timeout, ValueError): pass
with open(out + ".after", "w") as f: print("granted after release:", granted, file=f)
PYEOF
_as_user "$U1" "$PY" "$W/claims.py" "$SOCK" containers/org.example.u1/Documents "$W/claims.out" &
CLAIMS=$!
_wait_for 30 test -e "$W/claims.out.ready" || _fail "the claims script never reported"
T2=$(threads)
_assert_eq "status answered at once: True
refused errno 11: claim: too many requests waiting (limit 8 for uid $U1_UID); retry later
refused errno 11: claim: too many requests waiting (limit 8 for uid $U1_UID); retry later" "$(cat "$W/claims.out")" "waiting claims capped per user"
((T2 <= T0 + 8 + 1)) || _fail "threads grew from $T0 to $T2 with 8 claims waiting"
touch "$W/claims.out.go"
wait $CLAIMS || _fail "the claims script failed"
_assert_eq "granted after release: 8" "$(cat "$W/claims.out.after")" "the waiting claims are granted once the write claim ends"
_wait_for 10 eval '(($(threads) <= T0 + 1))' || _fail "threads stayed at $(threads) (at rest: $T0)"

# MARK: a line left unfinished is dropped; a connection holding a claim is not, however idle
cat >"$W/stall.py" <<'PYEOF'
import json, socket, sys, time
sock, path = sys.argv[1], sys.argv[2]
def conn():
    s = socket.socket(socket.AF_UNIX); s.settimeout(30); s.connect(sock); return s
stall = conn(); stall.sendall(b'{"v":1,"id":1,')
holder = conn(); holder.sendall((json.dumps({"v": 1, "id": 1, "op": "claim", "args": {"path": path, "mode": "read"}}) + "\n").encode())
f = holder.makefile(); assert json.loads(f.readline())["ok"]
t0 = time.time()
r = json.loads(stall.makefile().readline()); eof = stall.recv(1) == b""
print("stalled line: errno %d after %s s, closed %s" % (r["errno"], "8-12" if 7 < time.time() - t0 < 12.5 else int(time.time() - t0), eof))
time.sleep(max(0, 13 - (time.time() - t0)))
holder.sendall(b'{"v":1,"id":2,"op":"release","args":{"claim":"1"}}\n')
print("claim holder after 13 s idle:", json.loads(f.readline())["ok"])
PYEOF
_assert_eq "stalled line: errno 110 after 8-12 s, closed True
claim holder after 13 s idle: True" "$(_as_user "$U1" "$PY" "$W/stall.py" "$SOCK" containers/org.example.u1/Documents)" "stalls dropped, claim holders kept"
fs_umount
