# timeout: 420
# The trash's journal makes every operation whole across a crash (docs/DESIGN.md 50): kill -9
# of the daemon at a random moment of a loop of `containerfs trash`, of a `trash empty` of
# large trees, of a loop of `container remove`, and kill -9 of the CLI itself working on a
# store without a mount. After the next mount (or the next command that takes the store
# lock), for EVERY item: it is at its original place, or in files/ with exactly one info
# file whose Path= is its original path, or (emptied) gone entirely; no info file without
# its item, no item without an info file, expunged/ empty, no journal row left. Half the
# rounds kill at a random moment; the other half sample (SIGSTOP) until a journal row is
# pending, so that the kill surely lands inside an operation.
#
# Found with it: a kill between the info file's O_EXCL creation and its write left an empty
# info file that recovery kept for good (now settled: TrashJournal.isReservation); and a
# daemon killed while its own trash move waits on its mount never finishes dying (see
# kill_daemon): the case aborts the connection then, and counts it.
. "$(dirname "$0")/../lib/common.sh"
_require_cmd sqlite3
S=$TEST_STORE M=$(realpath -m "$TEST_MNT")
TR=$S/trash/.Trash-$(id -u)
ROUNDS=${TRASH_CRASH_ROUNDS:-4}
PARTS=" ${TRASH_CRASH_PARTS:-a b1 b2 c} "   # which parts run (by hand: one at a time)
RANDOM=${TRASH_CRASH_SEED:-$(($(date +%s%N) % 32768))}
echo "# seed $RANDOM (TRASH_CRASH_SEED reproduces the kill moments)"

# MARK: - Helpers

cat >"$TEST_TMP/check.py" <<'EOF'
# check.py STORE UID EXPECTED: EXPECTED lines are `KIND<TAB>PATH`; KIND is
#   file       a file whose content is its own name
#   dir:N      a directory holding N files
#   gone:N     a directory of N files that an empty may have deleted (only whole or gone)
#   container  a container root holding Documents/marker
# Prints every violation; the last line is "violations N placed P trashed T gone G".
import os, sys, sqlite3, urllib.parse
store, uid, expected = sys.argv[1], sys.argv[2], sys.argv[3]
tr = os.path.join(store, "trash", ".Trash-" + uid)
files_dir, info_dir = os.path.join(tr, "files"), os.path.join(tr, "info")
bad = []
files = set(os.listdir(files_dir)) if os.path.isdir(files_dir) else set()
infos = {}
for f in (os.listdir(info_dir) if os.path.isdir(info_dir) else []):
    if not f.endswith(".trashinfo"):
        continue
    path = None
    with open(os.path.join(info_dir, f), "rb") as h:
        for line in h.read().split(b"\n"):
            if line.startswith(b"Path=") and path is None:
                path = urllib.parse.unquote_to_bytes(line[5:].decode())
    infos[f[:-len(".trashinfo")]] = path
for name, path in infos.items():
    if name not in files:
        bad.append("info file without its item: %s (Path=%s)" % (name, path))
    if path is None:
        bad.append("info file without Path=: %s" % name)
for name in files:
    if name not in infos:
        bad.append("item without info file: files/%s" % name)
for root in [tr] + [os.path.join(store, "trash", d) for d in os.listdir(os.path.join(store, "trash"))]:
    ex = os.path.join(root, "expunged")
    if os.path.isdir(ex) and os.listdir(ex):
        bad.append("expunged/ not empty: %s: %s" % (ex, sorted(os.listdir(ex))[:5]))
by_path = {}
for name, path in infos.items():
    by_path.setdefault(path, []).append(name)
db = sqlite3.connect(os.path.join(store, "containerfs.db"))
rows = db.execute("select count(*) from journal").fetchone()[0]
if rows:
    bad.append("journal rows left: %d" % rows)
registered = {r[0] for r in db.execute("select id from containers")}

def count_files(d):
    return sum(len(fs) for _, _, fs in os.walk(d))

def whole(kind, where, rel):
    if kind == "file":
        with open(where, "rb") as h:
            got = h.read()
        want = os.path.basename(rel).encode()
        return got == want or "content %r, expected %r" % (got[:40], want)
    if kind.startswith(("dir:", "gone:")):
        n, want = count_files(where), int(kind.split(":")[1])
        return n == want or "%d files, expected %d" % (n, want)
    if kind == "container":
        return os.path.isfile(os.path.join(where, "Documents", "marker")) or "no Documents/marker"
    return "unknown kind " + kind

placed = trashed = gone = 0
for line in open(expected):
    kind, rel = line.rstrip("\n").split("\t", 1)
    orig = os.path.join(store, rel)
    at_orig = os.path.lexists(orig)
    held = [n for n in by_path.get(rel.encode(), []) if n in files]
    if at_orig and held:
        bad.append("%s: both at its place and in the trash (%s)" % (rel, held))
        continue
    if len(held) > 1:
        bad.append("%s: in the trash %d times: %s" % (rel, len(held), held))
        continue
    if not at_orig and not held:
        if kind.startswith("gone:"):
            gone += 1
            continue
        bad.append("%s: lost (neither at its place nor in the trash)" % rel)
        continue
    where = orig if at_orig else os.path.join(files_dir, held[0])
    ok = whole(kind, where, rel)
    if ok is not True:
        bad.append("%s: not whole at %s: %s" % (rel, where, ok))
    if kind == "container":
        cid = os.path.basename(rel)
        if at_orig and cid not in registered:
            bad.append("%s: in containers/ but not in the containers table" % cid)
        if not at_orig and cid in registered:
            bad.append("%s: trashed but still in the containers table" % cid)
    placed += at_orig
    trashed += not at_orig
for b in bad[:40]:
    print("VIOLATION " + b)
print("violations %d placed %d trashed %d gone %d" % (len(bad), placed, trashed, gone))
EOF

# check EXPECTED WHAT: runs the checker on the (unmounted or mounted) store; fails on any
# violation, else prints the tally.
check() {
    local out
    out=$("$PY" "$TEST_TMP/check.py" "$S" "$(id -u)" "$1" 2>&1) || _fail "$2: checker failed: $out"
    echo "$out" | grep '^VIOLATION' | sed 's/^/    /' >&2 || true
    local tally=${out##*$'\n'}
    [[ $tally == "violations 0 "* ]] || _fail "$2: $tally"
    _ok "$2: $tally"
    echo "$2: $tally" >>"$TEST_TMP/results"
}

# journal_rows: rows in the journal now (the store's database, read beside any user).
journal_rows() {
    sqlite3 "$S/containerfs.db" 'select count(*) from journal' 2>/dev/null || echo "?"
}

# kill_daemon: kill -9 of the mount's daemon, then `containerfs unmount` (lib/common.sh). A
# daemon killed while one of its threads waits for a request to its own mount (the trash's
# moves go through the mount, DESIGN.md 48) cannot finish dying by itself (that request
# waits for an answer only the dead daemon could give); the unmount then aborts the
# connection. KILLED_STUCK says so for the round; STUCK counts those rounds.
STUCK=0
kill_daemon() {
    _kill_daemon "$M" 3
    KILLED_STUCK=$_KILLED_STUCK
    STUCK=$((STUCK + KILLED_STUCK))
}

# hold PID: stops a background loop of this case (by its id), so that it starts nothing
# more (a CLI started once the daemon is dead would work on the store itself, and settle
# the journal before the mount does). end PID: kills it and the commands it runs (its own
# children, by their ids), and reaps it. Sets LOOP_CHILD to the pid of the command it was
# running (empty when between two).
hold() {
    kill -STOP "$1" 2>/dev/null || true
    LOOP_CHILD=$(cat "/proc/$1/task/$1/children" 2>/dev/null | awk '{ print $1 }') || LOOP_CHILD=""  # the loop may be over
}
end() {
    local c
    for c in $(cat "/proc/$1/task/$1/children" 2>/dev/null || true); do kill -KILL "$c" 2>/dev/null || true; done
    kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    for c in $LOOP_CHILD; do _wait_for 5 eval '! _pid_running "$c"' || _fail "$c still running after kill -9"; done
}

# freeze_in_window PID...: a kill at a random moment mostly lands between two operations
# (an operation is a few ms of a command's ~100 ms). This samples instead: after a random
# pause, PIDs are stopped (SIGSTOP); if a journal row is pending, an operation is half-done
# and they stay stopped for the kill; else they go on. Sets KILL_AT ("in-window after N
# samples", or "no window found" after 400).
freeze_in_window() {
    local i
    for ((i = 1; i <= 400; i++)); do
        sleep "0.0$((RANDOM % 40 + 10))"
        kill -STOP "$@" 2>/dev/null || true
        if [[ $(journal_rows) =~ ^[1-9] ]]; then
            KILL_AT="${KILL_AT:-0s}, then in-window after $i samples"
            return 0
        fi
        kill -CONT "$@" 2>/dev/null || true
    done
    KILL_AT="${KILL_AT:-0s}, then no window found"
}

# no_problems: `trash list` through the live mount lists nothing unusable.
no_problems() {
    local n
    n=$(containerfs trash list --json --store "$S" | "$PY" -c 'import json,sys; print(sum(1 for r in json.load(sys.stdin) if "problem" in r))')
    _assert_eq 0 "$n" "$1: trash list entries with a problem"
}

mkfiles() {  # mkfiles DIR COUNT PREFIX: COUNT files named PREFIXNNNN holding their name
    "$PY" - "$@" <<'EOF'
import os, sys
d, n, p = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.makedirs(d, exist_ok=True)
for i in range(n):
    name = "%s%04d" % (p, i)
    with open(os.path.join(d, name), "w") as f:
        f.write(name)
EOF
}

: >"$TEST_TMP/results"

# MARK: - (a) kill -9 of the daemon during a loop of `containerfs trash`

[[ $PARTS == *" a "* ]] || ROUNDS_A=0
fs_mount
# Calibration: how long one `containerfs trash` takes, to spread the kill moments over a loop.
C=$(_mkcontainer io.example.calibrate)
mkfiles "$C/Documents" 10 c
t0=$(date +%s%N)
for i in 0 1 2 3 4 5 6 7 8 9; do containerfs trash "$C/Documents/c000$i" >/dev/null; done
per=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.4f", (b - a) / 1e9 / 10 }')
span=$(awk -v p="$per" 'BEGIN { printf "%.2f", p * 201 }')
echo "# one trash: ${per}s; a loop of 201: ~${span}s"
_assert_output "removed 10 items, 50 bytes" containerfs trash empty --store "$S"

for ((r = 1; r <= ${ROUNDS_A:-ROUNDS}; r++)); do
    ID=io.example.round$r
    D=$(_mkcontainer "$ID")/Documents
    mkfiles "$D" 200 f
    mkfiles "$D/big" 2000 b
    rel=containers/$ID/Documents
    exp=$TEST_TMP/expected.a$r
    : >"$exp"
    for ((i = 0; i < 200; i++)); do printf 'file\t%s/f%04d\n' "$rel" "$i" >>"$exp"; done
    printf 'dir:2000\t%s/big\n' "$rel" >>"$exp"
    # The 2,000-file directory goes at a random place in the loop.
    bigat=$((RANDOM % 200))
    (
        for ((i = 0; i < 200; i++)); do
            ((i == bigat)) && containerfs trash "$D/big" >/dev/null 2>&1
            containerfs trash "$(printf '%s/f%04d' "$D" "$i")" >/dev/null 2>&1
        done
        true
    ) &
    loop=$!
    if ((r % 2 == 0)); then _pause_random "$(awk -v s="$span" 'BEGIN { print s * 0.7 }')"; freeze_in_window "$(_daemon_pid "$M")"; else _pause_random "$span"; fi
    hold "$loop"
    kill_daemon
    end "$loop"
    pending=$(journal_rows)
    echo "# round a$r: kill at ${KILL_AT} (big at #$bigat), journal rows at the kill: $pending, daemon stuck: $KILLED_STUCK"
    fs_mount
    check "$exp" "a$r (kill at ${KILL_AT}, rows pending $pending, stuck $KILLED_STUCK)"
    no_problems "a$r"
    # The trashed directory restores whole; then the round's trash is emptied.
    if [[ ! -e $D/big ]]; then
        _assert_ok containerfs trash restore big --store "$S"
        _assert_eq 2000 "$(find "$D/big" -type f | wc -l)" "a$r: files of the restored big"
    fi
    containerfs trash empty --store "$S" >/dev/null
done
fs_umount

# MARK: - (b1) kill -9 of the daemon during `trash empty` of large trees

[[ $PARTS == *" b1 "* ]] || ROUNDS_B1=0
for ((r = 1; r <= ${ROUNDS_B1:-ROUNDS}; r++)); do
    ID=io.example.empty$r
    containerfs container create "$ID" --store "$S" >/dev/null
    exp=$TEST_TMP/expected.b$r
    : >"$exp"
    for t in t1 t2 t3; do
        mkfiles "$S/containers/$ID/Documents/$t/sub" 500 x
        printf 'gone:500\t%s\n' "containers/$ID/Documents/$t" >>"$exp"
    done
    fs_mount
    for t in t1 t2 t3; do containerfs trash "$M/containers/$ID/Documents/$t" >/dev/null; done
    _assert_output "t1 t2 t3" sh -c "ls '$TR/files' | xargs"
    if ((r == 1)); then  # how long an empty of 9,000 files through the mount takes
        t0=$(date +%s%N)
        containerfs trash empty --store "$S" >/dev/null
        espan=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
        echo "# an empty of 3 trees of 500 files: ${espan}s"
        check "$exp" "b$r (no kill, calibration)"
        fs_umount
        continue
    fi
    containerfs trash empty --store "$S" >/dev/null 2>&1 &
    emptying=$!
    _pause_random "$espan"
    kill_daemon
    echo "# b$r: daemon killed, waiting for the empty"
    _wait_for 10 eval '! _pid_running "$emptying"' || _fail "b$r: trash empty still running 10 s after the daemon died"
    wait "$emptying" 2>/dev/null || true
    pending=$(journal_rows)
    echo "# round b$r: kill at ${KILL_AT} of ~${espan}s, journal rows at the kill: $pending, in files/: $(ls "$TR/files" | xargs), expunged/: $(ls "$TR/expunged" 2>/dev/null | xargs), daemon stuck: $KILLED_STUCK"
    fs_mount
    check "$exp" "b$r (kill at ${KILL_AT}, rows pending $pending, stuck $KILLED_STUCK)"
    no_problems "b$r"
    containerfs trash empty --store "$S" >/dev/null
    fs_umount
done

# MARK: - (b2) kill -9 of the daemon during a loop of `container remove`

[[ $PARTS == *" b2 "* ]] || ROUNDS_B2=0
fs_mount
for ((r = 1; r <= ${ROUNDS_B2:-ROUNDS}; r++)); do
    exp=$TEST_TMP/expected.c$r
    : >"$exp"
    ids=()
    for ((i = 0; i < 30; i++)); do
        id=io.example.r$r.c$i
        ids+=("$id")
        containerfs container create "$id" --store "$S" >/dev/null
        echo marker >"$M/containers/$id/Documents/marker"
        printf 'container\tcontainers/%s\n' "$id" >>"$exp"
    done
    t0=$(date +%s%N)
    (
        for id in "${ids[@]}"; do containerfs container remove "$id" --store "$S" >/dev/null 2>&1; done
        true
    ) &
    loop=$!
    # The first round measures the loop's length by letting it run to the end.
    if ((r == 1)); then
        wait "$loop"
        cspan=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
        echo "# a loop of 30 container removes: ${cspan}s"
        check "$exp" "c$r (no kill, calibration)"
    else
        if ((r % 2 == 0)); then _pause_random "$(awk -v s="$cspan" 'BEGIN { print s * 0.7 }')"; freeze_in_window "$(_daemon_pid "$M")"; else _pause_random "$cspan"; fi
        hold "$loop"
        kill_daemon
        end "$loop"
        pending=$(journal_rows)
        echo "# round c$r: kill at ${KILL_AT} of ~${cspan}s, journal rows at the kill: $pending, daemon stuck: $KILLED_STUCK"
        fs_mount
        check "$exp" "c$r (kill at ${KILL_AT}, rows pending $pending, stuck $KILLED_STUCK)"
        no_problems "c$r"
    fi
    # What `container list` shows is what containers/ holds; every trashed one restores.
    listed=$(containerfs container list --store "$S" | cut -f1 | { grep "^io.example.r$r.c" || true; } | sort | xargs)
    present=$(ls "$S/containers" | { grep "^io.example.r$r.c" || true; } | sort | xargs)
    echo "# c$r: $(wc -w <<<"$present") of 30 containers in place, the rest in the trash"
    _assert_eq "$present" "$listed" "c$r: container list = containers/"
    for id in "${ids[@]}"; do
        [[ -e $S/containers/$id ]] || containerfs trash restore "$id" --store "$S" >/dev/null || _fail "c$r: $id does not restore"
    done
    _assert_eq 30 "$(containerfs container list --store "$S" | cut -f1 | grep -c "^io.example.r$r.c")" "c$r: all 30 containers back"
    _assert_eq "" "$(ls "$TR/files")" "c$r: trash empty after the restores"
    for id in "${ids[@]}"; do _shows marker "$M/containers/$id/Documents/marker" || _fail "c$r: $id restored without its marker"; done
done
fs_umount

# MARK: - (c) kill -9 of the CLI itself, working on the store without a mount

ID=io.example.direct
containerfs container create "$ID" --store "$S" >/dev/null
D=$S/containers/$ID/Documents
t0=$(date +%s%N)
mkfiles "$D/cal" 10 c
for i in 0 1 2 3 4 5 6 7 8 9; do containerfs trash "$D/cal/c000$i" >/dev/null; done
dper=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.4f", (b - a) / 1e9 / 10 }')
containerfs trash empty --store "$S" >/dev/null
echo "# one trash without a mount: ${dper}s"
[[ $PARTS == *" c "* ]] || ROUNDS_C=0
for ((r = 1; r <= ${ROUNDS_C:-ROUNDS}; r++)); do
    mkfiles "$D/r$r" 200 f
    mkfiles "$D/r$r/big" 2000 b
    exp=$TEST_TMP/expected.d$r
    : >"$exp"
    for ((i = 0; i < 200; i++)); do printf 'file\tcontainers/%s/Documents/r%d/f%04d\n' "$ID" "$r" "$i" >>"$exp"; done
    printf 'dir:2000\tcontainers/%s/Documents/r%d/big\n' "$ID" "$r" >>"$exp"
    bigat=$((RANDOM % 200))
    (
        for ((i = 0; i < 200; i++)); do
            ((i == bigat)) && containerfs trash "$D/r$r/big" >/dev/null 2>&1
            containerfs trash "$(printf '%s/r%d/f%04d' "$D" "$r" "$i")" >/dev/null 2>&1
        done
        true
    ) &
    loop=$!
    if ((r % 2 == 0)); then
        # Sampled: the loop and the CLI it runs are stopped together until a row is pending.
        _pause_random "$(awk -v p="$dper" 'BEGIN { printf "%.2f", p * 140 }')"
        for ((i = 1; i <= 400; i++)); do
            sleep "0.0$((RANDOM % 40 + 10))"
            hold "$loop"
            [[ -z $LOOP_CHILD ]] || kill -STOP $LOOP_CHILD 2>/dev/null || true
            [[ $(journal_rows) =~ ^[1-9] ]] && break
            [[ -z $LOOP_CHILD ]] || kill -CONT $LOOP_CHILD 2>/dev/null || true
            kill -CONT "$loop" 2>/dev/null || true
        done
        KILL_AT="$KILL_AT, then in-window after $i samples"
        echo "# d$r: sampled rows $(journal_rows), stopped: $(for c in $LOOP_CHILD; do tr '\0' ' ' <"/proc/$c/cmdline" || true; done)"
    else
        _pause_random "$(awk -v p="$dper" 'BEGIN { printf "%.2f", p * 201 }')"
        hold "$loop"
    fi
    # The CLI the loop runs now is killed (kill -9, by its id), then the loop.
    cli=$LOOP_CHILD
    end "$loop"
    pending=$(journal_rows)
    echo "# round d$r: CLI ${cli:-none} killed at ${KILL_AT} (big at #$bigat), journal rows at the kill: $pending"
    # `trash list` takes no lock and settles nothing; a command that takes the lock does.
    containerfs trash list --store "$S" >/dev/null
    _assert_eq "$pending" "$(journal_rows)" "d$r: trash list left the journal alone"
    _assert_exit 1 containerfs trash empty NONEXISTENT --store "$S"
    check "$exp" "d$r (CLI killed at ${KILL_AT}, rows pending $pending)"
    if [[ ! -e $D/r$r/big ]]; then
        _assert_ok containerfs trash restore big --store "$S"
        _assert_eq 2000 "$(find "$D/r$r/big" -type f | wc -l)" "d$r: files of the restored big"
    fi
    containerfs trash empty --store "$S" >/dev/null
done

echo "# rounds whose killed daemon could not finish dying until containerfs unmount aborted its connection: $STUCK"
echo "# results:"
sed 's/^/#   /' "$TEST_TMP/results"
