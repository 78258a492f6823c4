# `containerfs run ID [--] CMD...`: CMD runs with HOME at the container (under the live
# mount), TMPDIR at tmp/, XDG_DATA_HOME and XDG_STATE_HOME at Library/Application Support,
# XDG_CONFIG_HOME at Library/Preferences, XDG_CACHE_HOME at Library/Caches; run exits with
# CMD's status (128 + the signal that killed it), passes SIGINT, SIGTERM and SIGHUP on, and
# marks the container in use while CMD lives (containers-and-wrappers §1.7, SPEC §2).
. "$(dirname "$0")/../lib/common.sh"
_users
S=$TEST_STORE M=$TEST_MNT
_assert_ok containerfs container create com.example.notes --store "$S"
# MARK: without a mount there is no home to give
_assert_exit 1 containerfs run --store "$S" com.example.notes -- true
_assert_eq "containerfs: $S: no live mount of this store (run puts the program's home under the mount)" "$_OUT" "unmounted"
fs_mount
C=$M/containers/com.example.notes
SHOW='for v in HOME TMPDIR XDG_DATA_HOME XDG_STATE_HOME XDG_CONFIG_HOME XDG_CACHE_HOME; do eval "echo $v=\$$v"; done; pwd'
cd "$TEST_TMP"
_assert_output "HOME=$C
TMPDIR=$C/tmp
XDG_DATA_HOME=$C/Library/Application Support
XDG_STATE_HOME=$C/Library/Application Support
XDG_CONFIG_HOME=$C/Library/Preferences
XDG_CACHE_HOME=$C/Library/Caches
$TEST_TMP" containerfs run --store "$S" com.example.notes -- sh -c "$SHOW"
# Without `--`, and the rest of the environment kept.
_assert_output "kept" env CFS_X=kept containerfs run --store "$S" com.example.notes printenv CFS_X
# The program works in its container through the mount.
_assert_ok containerfs run --store "$S" com.example.notes -- sh -c 'echo note >"$HOME/Documents/n.txt"'
_assert_output "note" cat "$C/Documents/n.txt"

# MARK: exit status
_assert_exit 3 containerfs run --store "$S" com.example.notes -- sh -c 'exit 3'
_assert_exit 143 containerfs run --store "$S" com.example.notes -- sh -c 'kill -TERM $$'
_assert_exit 137 containerfs run --store "$S" com.example.notes -- sh -c 'kill -KILL $$'

# MARK: signals passed on; the container is in use while the program lives
for sig in INT TERM HUP; do
    rm -f "$C/Documents/ready"
    env --default-signal=INT containerfs run --store "$S" com.example.notes -- \
        sh -c "trap 'echo got $sig >\"\$HOME/Documents/sig\"; exit 7' $sig; touch \"\$HOME/Documents/ready\"; while :; do sleep 0.05; done" &
    RUN=$!
    _CFS_PIDS+=("$RUN")
    _wait_for 10 test -e "$C/Documents/ready" || _fail "run ($sig): the program did not start"
    CHILD=$(pgrep -P "$RUN" -x sh)
    _assert_output "$(printf '%s\n' "$RUN" "$CHILD" | sort -n)" sqlite3 "$S/containerfs.db" \
        "SELECT pid FROM container_runs WHERE container = 'com.example.notes' AND pid IN ($RUN, $CHILD) ORDER BY pid"
    kill "-$sig" "$RUN"
    rc=0; wait "$RUN" || rc=$?
    _assert_eq 7 "$rc" "run's status after SIG$sig"
    _assert_output "got $sig" cat "$C/Documents/sig"
done

# MARK: bad input
_assert_exit 1 containerfs run --store "$S" com.example.none -- true
_assert_eq "containerfs: containers/com.example.none: no such file or directory" "$_OUT" "unknown container"
_assert_exit 1 containerfs run --store "$S" com.example.notes -- /no/such/program
_assert_eq "containerfs: /no/such/program: No such file or directory" "$_OUT" "missing program"
_assert_exit 2 containerfs run --store "$S" com.example.notes
[[ $_OUT == *"missing the command to run"* ]] || _fail "no command: $_OUT"
_assert_exit 2 containerfs run --store "$S" not_valid -- true
[[ $_OUT == *"not_valid: not a valid bundle identifier"* ]] || _fail "invalid id: $_OUT"
_assert_exit 2 containerfs run --store "$S" --no-network com.example.notes -- true
[[ $_OUT == *"--no-network goes with --sandbox"* ]] || _fail "--no-network alone: $_OUT"

# MARK: another user: in their own container, as themselves
_assert_ok _as_user "$U1" containerfs container create org.example.user --store "$S"
UC=$M/containers/org.example.user
_assert_output "$U1_UID $UC" _as_user "$U1" containerfs run --store "$S" org.example.user -- sh -c 'echo "$(id -u) $HOME"; touch "$HOME/Documents/mine"'
_assert_output "$U1_UID" fsop stat "$UC/Documents/mine" uid
_assert_exit 1 _as_user "$U1" containerfs run --store "$S" com.example.notes -- true
_assert_eq "containerfs: containers/com.example.notes: only its owner (uid 0) or root may run programs in it: permission denied" "$_OUT" "another's container"
# run's own options after ID would be taken for the command: refused, unless after `ID --`.
_assert_exit 2 containerfs run --store "$S" com.example.notes --sandbox -- true
[[ $_OUT == *"run's options go before ID (--sandbox comes after it"* ]] || _fail "option after ID: $_OUT"
_assert_output "a -- b" containerfs run --store "$S" com.example.notes -- echo a -- b

# MARK: a user's run is recorded by the daemon; nobody marks another's process
rm -f "$UC/Documents/ready"
# _as_user's command line, without the function: $! must be the run itself.
setpriv --reuid="$U1_UID" --regid="$U1_GID" --clear-groups --inh-caps=-all -- env HOME=/ PATH="$_CFS_USER_PATH" \
    containerfs run --store "$S" org.example.user -- sh -c 'touch "$HOME/Documents/ready"; exec sleep 30' &
RUN=$!
_CFS_PIDS+=("$RUN")
_wait_for 10 test -e "$UC/Documents/ready" || _fail "the user's program did not start"
CHILD=$(pgrep -P "$RUN")
_assert_output "$(printf '%s\n' "$RUN" "$CHILD" | sort -n)" sqlite3 "$S/containerfs.db" \
    "SELECT pid FROM container_runs WHERE container = 'org.example.user' AND pid IN ($RUN, $CHILD) ORDER BY pid"
USE='import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(10); f = s.makefile()
s.sendall((json.dumps({"v": 1, "id": 1, "op": "container.use", "args": {"id": sys.argv[2], "pid": sys.argv[3]}}) + "\n").encode())
r = json.loads(f.readline()); print(r["ok"], r.get("errno"), r.get("error"))'
_assert_output "False 22 pid 1: not a child of the calling process: invalid argument" _as_user "$U1" "$PY" -c "$USE" "$S/control.sock" org.example.user 1
_assert_output "False 13 containers/com.example.notes: only its owner (uid 0) or root may run programs in it: permission denied" _as_user "$U1" "$PY" -c "$USE" "$S/control.sock" com.example.notes "$RUN"
kill "$RUN"
rc=0; wait "$RUN" || rc=$?
_assert_eq 143 "$rc" "the user's run after SIGTERM"
