# An idle mount wakes nobody: after some work (files written, read and removed through the
# mount, a file written directly in the store and read through it) and a second to settle, no
# thread of the daemon is scheduled for 3 s — every thread's voluntary and involuntary
# context switches stay as they were — with the default per-CPU readers and with libfuse's
# pool (`-o threads=2`); SIGTERM then still ends it (signals-unmount checks the rest). Before,
# the thread serving the readers looked every 100 ms whether a signal had come, and the store
# watcher every second (DESIGN.md 33, "Stopping").
. "$(dirname "$0")/../lib/common.sh"
_require_root

# switches PID: "TID:N" for each thread of PID, N its voluntary + involuntary switches.
switches() {
    local task
    for task in /proc/"$1"/task/*; do
        echo "${task##*/}:$(awk '/^(non)?voluntary_ctxt_switches/ { n += $2 } END { print n }' "$task/status")"
    done | sort | tr '\n' ' '
}

n=0
for opts in "" threads=2; do
    what=${opts:-default mount}
    n=$((n + 1))
    fs_mount ${opts:+-o "$opts"}
    D=$(_open_documents com.example.idle$n)
    for i in $(seq 200); do echo "$i" >"$D/f$i"; done
    cat "$D"/f* >/dev/null
    rm -f "$D"/f*
    echo outside >"$TEST_STORE/containers/com.example.idle$n/Documents/outside"
    _assert_output outside cat "$D/outside"
    # Readers woken for nothing pause 4 ms at most; libfuse's surplus workers leave at once.
    sleep 1
    pid=$(_daemon_pid)
    before=$(switches "$pid")
    sleep 3
    after=$(switches "$pid")
    [[ $before == "$after" ]] ||
        _fail "$what: threads of the idle daemon were scheduled in 3 s: before $before; after $after"
    _ok "$what: no thread of the daemon ran in 3 s idle ($(wc -w <<<"$after") threads)"
    kill -TERM "$pid"
    _wait_for 10 eval '! _is_mounted "$TEST_MNT"' || _fail "$what: still mounted 10 s after SIGTERM"
    _wait_daemon "$TEST_MNT"
    _ok "$what: SIGTERM unmounted the idle daemon, which exited 0"
done
