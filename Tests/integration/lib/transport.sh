# Checks shared by the transports' cases (per-cpu-readers, uring-transport,
# idle-mount-sleeps): what each CPU's requests must do, an fsync that must not hold up its
# CPU, and an idle daemon that must not run. The first two add the requests they made to
# $ops. Needs common.sh, $PY, $TEST_TMP.

# _exercise_from_cpu CPU DIR STORE_DIR: from CPU, a 4 MiB file written and read back cold
# (data replies), 2,000 names created, renamed, listed and removed, and a set-user-ID bit
# cleared by another user's write ($U1, from _users).
_exercise_from_cpu() {
    local cpu=$1 W=$2/cpu$1 SW=$3/cpu$1
    [[ -e $TEST_TMP/src ]] || head -c 4M /dev/urandom >"$TEST_TMP/src"
    taskset -c "$cpu" mkdir "$W"
    taskset -c "$cpu" cp "$TEST_TMP/src" "$W/big"
    sync
    echo 3 >/proc/sys/vm/drop_caches
    _assert_ok taskset -c "$cpu" cmp "$W/big" "$TEST_TMP/src"
    _assert_ok cmp "$SW/big" "$TEST_TMP/src"
    _assert_output 2000 taskset -c "$cpu" "$PY" - "$W" <<'PY'
import os, sys
w = sys.argv[1]
for i in range(2000):
    with open(f"{w}/f{i}", "w") as f:
        f.write(str(i))
for i in range(0, 2000, 2):
    os.rename(f"{w}/f{i}", f"{w}/g{i}")
names = [n for n in os.listdir(w) if n != "big"]
assert sorted(open(f"{w}/{n}").read() for n in names) == sorted(str(i) for i in range(2000))
print(len(names))
for n in names:
    os.unlink(f"{w}/{n}")
PY
    _assert_output "big" taskset -c "$cpu" ls "$W"
    echo data >"$W/suid"
    chmod 4777 "$W/suid"
    _assert_ok _as_user "$U1" taskset -c "$cpu" sh -c "echo more >>'$W/suid'"
    _assert_output "777" stat -c %a "$SW/suid"
    ops=$((ops + 2000 * 3 + 1000 + 64))
    _ok "cpu $cpu: 4 MiB read back cold, 2,000 names made, renamed, listed and removed, set-ID cleared"
}

# _exercise_every_cpu DIR STORE_DIR: _exercise_from_cpu from each online CPU in turn.
_exercise_every_cpu() {
    local cpu
    for cpu in $(seq 0 $(($(nproc --all) - 1))); do
        taskset -c "$cpu" true 2>/dev/null || continue   # offline
        _exercise_from_cpu "$cpu" "$1" "$2"
    done
}

# _fsync_meanwhile DIR STORE_DIR WHAT: 256 MiB written through the mount on CPU 0 are still
# dirty in the store when the writer fsyncs them, so the daemon's fsync waits on the disk. A
# second process on CPU 0 watches the writer and, the moment it waits in the daemon, makes
# a lookup and a create: both must be answered before the fsync returns (WHAT names what
# serves CPU 0 in the message). Skipped on a tmpfs store, where an fsync waits on nothing.
_fsync_meanwhile() {
    local D=$1 SD=$2 what=$3
    if [[ $(stat -f -c %T "$SD") == tmpfs ]]; then
        _ok "SKIP the fsync check: the store is on tmpfs, where an fsync waits on nothing"
        return 0
    fi
    rm -f "$TEST_TMP/fsync.started"
    taskset -c 0 "$PY" - "$D/dirty" "$TEST_TMP/fsync.started" >"$TEST_TMP/fsync.out" 2>&1 <<'PY' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
block = os.urandom(1 << 20)
for _ in range(256):
    os.write(fd, block)
open(sys.argv[2], "w").close()
start = time.monotonic()
os.fsync(fd)
print(start, time.monotonic())
PY
    local writer=$!
    _CFS_PIDS+=($writer)
    _assert_ok timeout 60 taskset -c 0 "$PY" - "$D" "$writer" "$TEST_TMP/fsync.started" "$TEST_TMP/other.out" <<'PY'
import os, sys, time
d, writer, started, out = sys.argv[1:]
def parked():
    try:
        return open(f"/proc/{writer}/wchan").read() == "request_wait_answer"
    except FileNotFoundError:
        sys.exit("the writer ended before its fsync was seen waiting in the daemon")
while not (os.path.exists(started) and parked()):
    time.sleep(0.001)
try:
    os.stat(f"{d}/never-made")
except FileNotFoundError:
    pass
open(f"{d}/made-meanwhile", "w").close()
open(out, "w").write(f"{time.monotonic()}\n")
PY
    wait "$writer" || _fail "the writer failed: $(cat "$TEST_TMP/fsync.out")"
    local began ended other
    read -r began ended <"$TEST_TMP/fsync.out"
    other=$(cat "$TEST_TMP/other.out")
    "$PY" -c 'import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)' "$other" "$ended" ||
        _fail "the lookup and create on CPU 0 were answered only after the fsync returned (fsync $began-$ended, other done $other; $what)"
    _assert_ok cmp -n $((256 << 20)) "$D/dirty" "$SD/dirty"
    rm -f "$D/dirty" "$D/made-meanwhile"
    _ok "a lookup and a create on CPU 0 answered during an fsync of $("$PY" -c 'import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 3))' "$began" "$ended") s ($what)"
    ops=$((ops + 260))
}

# _assert_lane_cpus DIR WHAT: after an fsync and a fallocate through the mount (in DIR),
# the slow lanes' workers run where DESIGN.md 33 ("Slow requests") says: a fsync lane's
# (cfs-sync-N), started by a pinned reader or queue thread, may still run on every CPU the
# daemon's main thread may; a fallocate lane's (cfs-slow-N) on CPU N alone. Masks are read
# with sched_getaffinity. The first check is skipped when the daemon has one CPU, where a
# pinned worker would look the same.
_assert_lane_cpus() {
    local D=$1 what=$2 masks
    "$PY" -c 'import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644); os.write(fd, b"x"); os.fsync(fd)
os.posix_fallocate(fd, 0, 65536); os.close(fd); os.unlink(sys.argv[1])' "$D/lane-fsync"
    masks=$("$PY" - "$(_daemon_pid)" <<'PY'
import os, sys
pid = int(sys.argv[1])
def cpus(tid):
    return ",".join(map(str, sorted(os.sched_getaffinity(tid))))
sync, slow = set(), []
for tid in os.listdir(f"/proc/{pid}/task"):
    try:
        name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
        if name.startswith("cfs-sync"):
            sync.add(cpus(int(tid)))
        elif name.startswith("cfs-slow-"):
            slow.append("ok" if cpus(int(tid)) == name.rsplit("-", 1)[1] else f"{name}:{cpus(int(tid))}")
    except (FileNotFoundError, ProcessLookupError):
        pass   # a thread that ended meanwhile
print(cpus(pid), " ".join(sorted(sync)) or "none", "|", " ".join(sorted(set(slow))) or "none")
PY
    )
    _assert_eq "ok" "${masks#*| }" "fallocate-lane workers each on its own CPU alone ($what)"
    masks=${masks% |*}
    if [[ ${masks%% *} != *,* ]]; then
        _ok "SKIP the fsync lane's CPUs ($what): the daemon has one CPU (${masks%% *})"
        return 0
    fi
    _assert_eq "${masks%% *}" "${masks#* }" "CPUs of the fsync-lane workers ($what), against the daemon's"
}

# _threads PID: "TID SWITCHES CPU-NS" for each thread of PID (voluntary + involuntary context
# switches, and the CPU time of /proc/.../schedstat).
_threads() {
    local task
    for task in /proc/"$1"/task/*; do
        echo "${task##*/} $(awk '/^(non)?voluntary_ctxt_switches/ { n += $2 } END { print n }' "$task/status" 2>/dev/null) $(cut -d' ' -f1 "$task/schedstat" 2>/dev/null)"
    done | sort
}

# _assert_idle WHAT [SECONDS]: after two seconds to settle (readers woken for nothing pause
# 4 ms at most, libfuse's surplus workers leave at once, and an invalidation the kernel could
# not take yet is retried for up to 1.02 s: 1, 2, 4 … 512 ms; a one-second settle failed now
# and then on a busy machine, one thread with 4 wake-ups), no thread of the mount's daemon runs for
# SECONDS (3): every thread there before and after has the same switches and CPU time, and
# none is started meanwhile (one that ends, an idle libdispatch worker, is fine).
_assert_idle() {
    local what=$1 seconds=${2:-3} pid before after ran
    sleep 2
    pid=$(_daemon_pid)
    before=$(_threads "$pid")
    sleep "$seconds"
    after=$(_threads "$pid")
    ran=$(join -a 2 <(echo "$before") <(echo "$after") | awk 'NF != 5 || $2 != $4 || $3 != $5')
    [[ -z $ran ]] || _fail "$what: threads of the idle daemon ran in $seconds s (TID, then switches and CPU ns before and after; a new thread has one pair): $ran; their names: $(for t in $(awk '{ print $1 }' <<<"$ran"); do echo -n "$t=$(cat /proc/"$pid"/task/"$t"/comm 2>/dev/null) "; done)"
    _ok "$what: no thread of the daemon ran in $seconds s idle ($(wc -l <<<"$after") threads)"
}
