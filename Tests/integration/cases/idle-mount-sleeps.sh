# An idle mount wakes nobody: after some work (files written, read and removed through the
# mount, a file written directly in the store and read through it; on the default mount
# also a coordinated write and a presenter, which start libdispatch's workers) and a second
# to settle, no thread of the daemon runs for 3 s — every thread that is there before and
# after has the same context switches (voluntary and involuntary) and the same CPU time
# (schedstat), and none is started meanwhile (one that ends, an idle libdispatch worker,
# is fine) — with the default per-CPU readers and with libfuse's pool (`-o threads=2`);
# SIGTERM then still ends it (signals-unmount checks the rest); uring-transport checks
# `-o uring` the same way. Before, the thread serving the readers looked every 100 ms whether
# a signal had come, and the store watcher every second (DESIGN.md 33, "Stopping").
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/transport.sh"
_require_root

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
    if [[ -z $opts ]]; then
        _assert_ok containerfs coordinate --write "$D/outside" -- sh -c 'echo coordinated >"$1"' sh "$D/outside"
        timeout 1 containerfs watch "$D" >/dev/null 2>&1 || true
        _assert_output coordinated cat "$D/outside"
    fi
    _assert_idle "$what"
    pid=$(_daemon_pid)
    kill -TERM "$pid"
    _wait_for 10 eval '! _is_mounted "$TEST_MNT"' || _fail "$what: still mounted 10 s after SIGTERM"
    _wait_daemon "$TEST_MNT"
    _ok "$what: SIGTERM unmounted the idle daemon, which exited 0"
done
