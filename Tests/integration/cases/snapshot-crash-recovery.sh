# timeout: 420
# Snapshot publish and remove are journaled (docs/DESIGN.md 52): after kill -9 at any moment
# the next mount shows each snapshot whole or not at all, and no debris. Rounds of: kill -9
# of the daemon during `snapshot publish` of a 3,000-file tree through it; kill -9 of the
# CLI publishing on a store without a mount; the same two during `snapshot remove`. After
# each, the store is mounted again and, for EVERY name in snapshots/: the same tree as the
# source (names, types, modes, sizes, bytes, link targets), its row `published` with the
# source's file and byte counts; no row without its directory or the reverse, no row left
# `publishing` or `removing`, `.staging/` empty, and `ls MNT/snapshots` lists exactly the
# rows. Half the rounds kill at a random moment of the operation; the other half stop the
# process (SIGSTOP) at random moments until its row is pending, so that the kill surely lands
# inside it. Zero violations.
. "$(dirname "$0")/../lib/common.sh"
_require_root
_require_cmd sqlite3
S=$TEST_STORE M=$(realpath -m "$TEST_MNT")
ROUNDS=${SNAPSHOT_CRASH_ROUNDS:-12}
RANDOM=${SNAPSHOT_CRASH_SEED:-$(($(date +%s%N) % 32768))}
echo "# seed $RANDOM (SNAPSHOT_CRASH_SEED reproduces the kill moments)"
ID=io.example.crash
SRC=containers/$ID/Documents

# MARK: - Helpers

cat >"$TEST_TMP/check.py" <<'PYEOF'
# check.py STORE SOURCE FILES BYTES LISTED: every snapshot is the tree at STORE/SOURCE, with
# a `published` row counting FILES and BYTES; rows and directories match; no pending row;
# .staging/ empty; LISTED (`ls MNT/snapshots`, one a line) names exactly the rows.
# Prints every violation; the last line is "violations N snapshots K".
import hashlib, os, sqlite3, stat, sys
store, source, files, nbytes, listed = sys.argv[1:6]

def tree(top, data=None):
    # data: the snapshot's .snapshot-data/NAME/, where the data of a file whose own is
    # linked from the live file is (docs/DESIGN.md 58), under the file's inode number.
    out = []
    for root, dirs, names in os.walk(top):
        dirs.sort()
        for n in sorted(dirs + names):
            p = os.path.join(root, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, top)
            if stat.S_ISLNK(st.st_mode):
                out.append((rel, "l", os.readlink(p)))
            elif stat.S_ISDIR(st.st_mode):
                out.append((rel, "d", oct(st.st_mode & 0o7777)))
            else:
                linked = os.path.join(data, str(st.st_ino)) if data else None
                with open(linked if linked and os.path.exists(linked) else p, "rb") as h:
                    digest = hashlib.sha256(h.read()).hexdigest()
                out.append((rel, "f", oct(st.st_mode & 0o7777), st.st_size, digest))
    return out

want = tree(os.path.join(store, source))
bad = []
db = sqlite3.connect(os.path.join(store, "containerfs.db"))
rows = {r[0]: r[1:] for r in db.execute("select name, state, files, bytes from snapshots")}
snapdir = os.path.join(store, "snapshots")
dirs = set(os.listdir(snapdir))
for name, (state, f, b) in sorted(rows.items()):
    if state != "published":
        bad.append("%s: row left %s" % (name, state))
    if name not in dirs:
        bad.append("%s: a row without its directory" % name)
    if (str(f), str(b)) != (files, nbytes):
        bad.append("%s: row counts %s files, %s bytes; expected %s, %s" % (name, f, b, files, nbytes))
for name in sorted(dirs):
    if name not in rows:
        bad.append("%s: in snapshots/ without a row" % name)
    got = tree(os.path.join(snapdir, name), os.path.join(store, ".snapshot-data", name))
    if got != want:
        missing = [e[0] for e in want if e not in got][:3]
        extra = [e[0] for e in got if e not in want][:3]
        bad.append("%s: not whole: %d entries of %d; missing or different %s, unexpected %s" % (name, len(got), len(want), missing, extra))
data = os.path.join(store, ".snapshot-data")
for name in sorted(os.listdir(data) if os.path.isdir(data) else []):
    if name not in rows:
        bad.append("%s: data in .snapshot-data/ without a row" % name)
staging = os.listdir(os.path.join(store, ".staging"))
if staging:
    bad.append(".staging/ not empty: %s" % sorted(staging)[:5])
shown = sorted(l for l in open(listed).read().split("\n") if l)
if shown != sorted(rows):
    bad.append("ls MNT/snapshots shows %s, the rows are %s" % (shown[:10], sorted(rows)[:10]))
for v in bad[:40]:
    print("VIOLATION " + v)
print("violations %d snapshots %d" % (len(bad), len(dirs)))
PYEOF

VIOLATIONS=0
# check WHAT: mounts (if needed), runs the checker, counts and shows violations.
check() {
    local out tally
    _is_mounted "$M" || fs_mount
    ls "$M/snapshots" >"$TEST_TMP/listed"
    out=$("$PY" "$TEST_TMP/check.py" "$S" "$SRC" "$FILES" "$BYTES" "$TEST_TMP/listed" 2>&1) || _fail "$1: checker failed: $out"
    echo "$out" | grep '^VIOLATION' | sed 's/^/    /' >&2 || true
    tally=${out##*$'\n'}
    [[ $tally =~ ^violations\ ([0-9]+) ]] || _fail "$1: checker said: $out"
    VIOLATIONS=$((VIOLATIONS + BASH_REMATCH[1]))
    echo "$1: $tally" >>"$TEST_TMP/results"
    _ok "$1: $tally"
}

# pending: rows of snapshots a publish or remove has not finished.
pending() {
    sqlite3 "$S/containerfs.db" "select count(*) from snapshots where state != 'published'" 2>/dev/null || echo "?"
}

# kill_daemon: kill -9 of the mount's daemon, then `containerfs unmount` (lib/common.sh).
kill_daemon() { _kill_daemon "$M" 5; }

# stop_in_window PID: stops PID (SIGSTOP) at random moments until a row is pending, and
# leaves it stopped then (for the kill); gives up after 400 samples (then left running).
stop_in_window() {
    local i
    for ((i = 1; i <= 400; i++)); do
        kill -STOP "$1" 2>/dev/null || true
        if [[ $(pending) =~ ^[1-9] ]]; then
            KILL_AT="stopped in-window after $i samples"
            return 0
        fi
        kill -CONT "$1" 2>/dev/null || true
        sleep "0.00$((RANDOM % 9 + 1))"
    done
    KILL_AT="no window found"
}

# wait_cli PID WHAT: the CLI whose daemon died ends (10 s) with a failure.
wait_cli() {
    local rc=0
    _wait_for 10 eval '! _pid_running "$1"' || _fail "$2: the CLI still runs 10 s after its daemon died"
    wait "$1" 2>/dev/null || rc=$?
    CLI_RC=$rc
}

# MARK: - The source: 3,000 files in 10 directories, of sizes from 5 bytes to 40 KiB

fs_mount
_mkcontainer "$ID" >/dev/null
"$PY" - "$M/$SRC" <<'PYEOF'
import os, sys
top = sys.argv[1]
for d in range(10):
    os.makedirs(os.path.join(top, "d%d" % d, "sub"), exist_ok=True)
    for i in range(300):
        name = "f%04d" % i
        where = os.path.join(top, "d%d" % d, "sub" if i % 3 == 0 else "", name)
        with open(where, "w") as f:
            f.write((name + "\n") * (1 + (i * 37 + d) % 8000 // 5))
os.symlink("d0/f0001", os.path.join(top, "link"))
os.link(os.path.join(top, "d1", "f0001"), os.path.join(top, "d1", "hard"))
PYEOF
_assert_output 3001 sh -c "find '$M/$SRC' -type f | wc -l"
# Calibration: one publish through the daemon and one on the store; the counts every
# snapshot's row must show.
t0=$(date +%s%N)
_assert_output "$M/snapshots/base" containerfs snapshot publish "$M/$SRC" --name base
span_d=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
read -r FILES BYTES < <(sqlite3 -separator ' ' "$S/containerfs.db" "select files, bytes from snapshots where name = 'base'")
t0=$(date +%s%N)
_assert_ok containerfs snapshot remove base --store "$S"
span_rd=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
fs_umount
t0=$(date +%s%N)
_assert_output "$S/snapshots/base" containerfs snapshot publish "$S/$SRC" --name base
span_c=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
echo "# publish of 3,001 files: ${span_d}s through the daemon, ${span_c}s on the store; remove through the daemon ${span_rd}s; a row counts $FILES files, $BYTES bytes"
: >"$TEST_TMP/results"
check "calibration"

# MARK: - The rounds
# Kinds in turn: (a) daemon killed during publish, (b) CLI killed publishing on the store,
# (c) daemon killed during remove, (d) CLI killed removing on the store.
for ((r = 1; r <= ROUNDS; r++)); do
    kind=$(((r - 1) % 4))
    sampled=$((((r - 1) / 4) % 2))
    KILL_AT=""
    case $kind in
    0)
        _is_mounted "$M" || fs_mount
        containerfs snapshot publish "$M/$SRC" --name "r$r" >/dev/null 2>&1 &
        cli=$!
        if ((sampled)); then stop_in_window "$(_daemon_pid "$M")"; else _pause_random "$span_d"; fi
        rows=$(pending)
        kill_daemon
        wait_cli "$cli" "r$r publish"
        what="r$r: daemon killed during publish at $KILL_AT (rows pending $rows, CLI exit $CLI_RC)"
        ;;
    1)
        ! _is_mounted "$M" || fs_umount
        containerfs snapshot publish "$S/$SRC" --name "r$r" >/dev/null 2>&1 &
        cli=$!
        if ((sampled)); then stop_in_window "$cli"; else _pause_random "$span_c"; fi
        rows=$(pending)
        kill -KILL "$cli" 2>/dev/null || true
        wait "$cli" 2>/dev/null || true
        what="r$r: CLI killed publishing on the store at $KILL_AT (rows pending $rows)"
        ;;
    2)
        _is_mounted "$M" || fs_mount
        containerfs snapshot publish "$M/$SRC" --name "v$r" >/dev/null
        containerfs snapshot remove "v$r" --store "$S" >/dev/null 2>&1 &
        cli=$!
        if ((sampled)); then stop_in_window "$(_daemon_pid "$M")"; else _pause_random "$span_rd"; fi
        rows=$(pending)
        kill_daemon
        wait_cli "$cli" "r$r remove"
        what="r$r: daemon killed during remove at $KILL_AT (rows pending $rows, CLI exit $CLI_RC)"
        ;;
    3)
        ! _is_mounted "$M" || fs_umount
        containerfs snapshot publish "$S/$SRC" --name "v$r" >/dev/null
        containerfs snapshot remove "v$r" --store "$S" >/dev/null 2>&1 &
        cli=$!
        if ((sampled)); then stop_in_window "$cli"; else _pause_random "$span_rd"; fi
        rows=$(pending)
        kill -KILL "$cli" 2>/dev/null || true
        wait "$cli" 2>/dev/null || true
        what="r$r: CLI killed removing on the store at $KILL_AT (rows pending $rows)"
        ;;
    esac
    echo "# $what"
    check "$what"
done
! _is_mounted "$M" || fs_umount

echo "# results:"
sed 's/^/#   /' "$TEST_TMP/results"
_assert_eq 0 "$VIOLATIONS" "violations in $ROUNDS rounds"
