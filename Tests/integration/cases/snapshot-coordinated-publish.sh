# timeout: 120
# `snapshot publish` through the daemon freezes its source under a coordinated read of the
# whole subtree (docs/SEMANTICS.md §4, reference coordination.md §10 behaviour 40,
# docs/DESIGN.md 57): a presenter of a file inside the source that holds unsaved changes is
# asked to save first, and the snapshot has the saved content; writers of the source wait
# while the publish runs and never after it; readers never wait.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/coordination.sh"
_require_root
S=$TEST_STORE M=$TEST_MNT
fs_mount
C=$M/containers/com.example.coord
_mkcontainer com.example.coord >/dev/null
D=$C/Documents
mkdir "$D/sub"
printf 'on disk\n' >"$D/sub/note.txt"
printf 'other\n' >"$D/other.txt"
printf 'third\n' >"$D/third.txt"

# A presenter of PATH (over the control socket, as an editor would be) holding PENDING, not
# yet written: asked to save, it writes PENDING to PATH through the mount, then waits until
# the file GATE exists (if given), then answers. It logs "request STEPS PATH" per request.
cat >"$TEST_TMP/presenter.py" <<'PYEOF'
import json, os, socket, sys, time
sock, mount, path, pending, log, gate = sys.argv[1:7]
s = socket.socket(socket.AF_UNIX)
s.connect(sock)
f = s.makefile("rw")
def send(o):
    f.write(json.dumps(o) + "\n"); f.flush()
send({"v": 1, "id": 1, "op": "presenter.register", "args": {"path": path}})
r = json.loads(f.readline())
assert r.get("ok"), r
open(log, "a").write("registered\n")
for line in f:
    o = json.loads(line)
    if "request" not in o:
        continue
    with open(log, "a") as l:
        l.write("request %s %s\n" % (",".join(o["steps"]), o["path"]))
    if "save" in o["steps"] and pending:
        with open(os.path.join(mount, path), "w") as w:
            w.write(pending)
        pending = ""
    while gate != "-" and not os.path.exists(gate):
        time.sleep(0.02)
    send({"v": 1, "id": 2, "op": "presenter.answer", "args": {"presenter": str(o["presenter"]), "request": str(o["request"]), "errno": "0"}})
PYEOF
REL=containers/com.example.coord/Documents/sub/note.txt

# presenter NAME PENDING [GATE]: starts the presenter of $REL, returns once registered.
presenter() {
    local log=$TEST_TMP/presenter.$1.log
    : >"$log"
    "$PY" "$TEST_TMP/presenter.py" "$S/control.sock" "$M" "$REL" "$2" "$log" "${3:--}" &
    _CFS_PIDS+=("$!")
    PRESENTER=$!
    _wait_for 10 eval '[[ -s $log ]]' || _fail "presenter $1: not registered after 10 s"
    _ok "presenter $1 of $REL holds '${2%$'\n'}'"
}

# MARK: the presenter of a file inside the source saves first: the snapshot has its content
presenter one $'saved one\n'
_assert_output "$M/snapshots/one" containerfs snapshot publish "$C" --name one
_assert_output "registered
request save,relinquishToReader $REL" cat "$TEST_TMP/presenter.one.log"
_assert_output "saved one" cat "$M/snapshots/one/Documents/sub/note.txt"
_assert_output "other" cat "$M/snapshots/one/Documents/other.txt"
_assert_output "saved one" cat "$D/sub/note.txt"
kill "$PRESENTER" && wait "$PRESENTER" 2>/dev/null || true

# MARK: the same for a directory inside the container and for the file itself as the source
presenter two $'saved two\n'
_assert_output "$M/snapshots/two" containerfs snapshot publish "$D/sub" --name two
_assert_output "saved two" cat "$M/snapshots/two/note.txt"
kill "$PRESENTER" && wait "$PRESENTER" 2>/dev/null || true
presenter three $'saved three\n'
_assert_output "$M/snapshots/three" containerfs snapshot publish "$D/sub/note.txt" --name three
_assert_output "saved three" cat "$M/snapshots/three"
# A presenter outside the source is not asked.
_assert_output "$M/snapshots/four" containerfs snapshot publish "$D/other.txt" --name four
_assert_output "other" cat "$M/snapshots/four"
_assert_output "registered
request save,relinquishToReader $REL" cat "$TEST_TMP/presenter.three.log"
kill "$PRESENTER" && wait "$PRESENTER" 2>/dev/null || true

# MARK: writers of the source wait while the publish runs, readers do not; none waits after
# The presenter answers only once GATE exists: the publish is held in its coordinated read.
GATE=$TEST_TMP/gate
presenter five $'saved five\n' "$GATE"
containerfs snapshot publish "$C" --name five >"$TEST_TMP/publish.out" 2>&1 &
PUB=$!
_wait_for 10 eval 'grep -q "^request" "$TEST_TMP/presenter.five.log"' || _fail "the presenter was not asked to save"
_still_waiting "$PUB" "publish, its presenter not answered yet"
# A writer of another file of the source, through the mount: it waits for the publish.
sh -c 'printf "appended\n" >>"$1"' sh "$D/other.txt" &
WRITER=$!
_wait_parked "$WRITER" "append to Documents/other.txt during the publish"
# A writer outside the source does not.
_mkcontainer com.example.coord2 >/dev/null
_assert_ok timeout 2 sh -c "printf 'x\n' >'$M/containers/com.example.coord2/Documents/x'"
# Readers of the source do not wait (but for a writer queued on the same file, as always:
# writers do not starve), nor do readers of snapshots.
_assert_output "third" timeout 2 cat "$D/third.txt"
_assert_output "other" timeout 2 cat "$M/snapshots/one/Documents/other.txt"
_still_waiting "$WRITER" "append to Documents/other.txt"
touch "$GATE"
_finish "$PUB" "publish"
_assert_eq 0 "$_RC" "publish exit status"
_assert_output "$M/snapshots/five" cat "$TEST_TMP/publish.out"
_finish "$WRITER" "append"
_assert_eq 0 "$_RC" "append exit status"
# The snapshot is as the source was while frozen: the saved note, not the waiting append.
_assert_output "saved five" cat "$M/snapshots/five/Documents/sub/note.txt"
_assert_output "other" cat "$M/snapshots/five/Documents/other.txt"
_assert_output "other
appended" cat "$D/other.txt"
# After the publish, writers of the source go at once.
_assert_ok timeout 2 sh -c "printf 'later\n' >>'$D/other.txt'"
kill "$PRESENTER" && wait "$PRESENTER" 2>/dev/null || true
fs_umount
