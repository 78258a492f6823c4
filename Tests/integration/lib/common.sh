# shellcheck shell=bash
# Verbs shared by every case of Tests/integration (STYLE practice 13, libfuse's test
# helpers, swift-nio's IntegrationTests/test_functions.sh).
#
# A case starts with
#     . "$(dirname "$0")/../lib/common.sh"
# and runs under `bash -e`. run.sh hands it a fresh $TEST_MNT, $TEST_STORE and $TEST_TMP;
# run by hand (`bash -e cases/x.sh`), it makes its own under /var/tmp.
#
# Exit codes: 0 pass, 77 skip (`_skip`), anything else fail (`_fail`). Whatever way the
# case ends (success, failed assertion, `set -e`, a signal from run.sh's timeout), the EXIT
# trap unmounts every mount the case made, lazily if it has to, and stops its daemons.

set -o pipefail
shopt -s nullglob

TEST_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
_CFS_REPO=$(cd "$TEST_LIB/../../.." && pwd)
export TEST_LIB

# MARK: - Environment (run.sh sets it; a hand run gets its own)

if [[ -z ${TEST_ROOT:-} ]]; then
    TEST_ROOT=$(mktemp -d /var/tmp/containerfs-case.XXXXXX)
    chmod 755 "$TEST_ROOT"
    _CFS_OWN_ROOT=1
fi
: "${TEST_MNT:=$TEST_ROOT/mnt}" "${TEST_STORE:=$TEST_ROOT/store}" "${TEST_TMP:=$TEST_ROOT/tmp}"
: "${TEST_NAME:=$(basename "$0" .sh)}"
mkdir -p "$TEST_MNT" "$TEST_STORE" "$TEST_TMP"
export TEST_ROOT TEST_MNT TEST_STORE TEST_TMP TEST_NAME

CONTAINERFS=${CONTAINERFS:-$_CFS_REPO/.build/debug/containerfs}
[[ -x $CONTAINERFS ]] || { echo "FAIL: $CONTAINERFS: missing or not executable" >&2; exit 1; }
CONTAINERFS=$(realpath "$CONTAINERFS")
export CONTAINERFS

# The built binary first (mount.fuse3 runs `containerfs`, found on PATH), then the helpers
# (fsop); users run with a PATH that holds nothing of root's home.
_CFS_SYSTEM_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH="$(dirname "$CONTAINERFS"):$TEST_LIB/bin:$_CFS_SYSTEM_PATH:$PATH"
_CFS_USER_PATH="$(dirname "$CONTAINERFS"):$TEST_LIB/bin:$_CFS_SYSTEM_PATH"
# The system interpreter: root's may live in a home other users cannot read.
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3)
export PY LC_ALL=C.UTF-8

# MARK: - Reporting

_CFS_CHECKS=0

# _fail MESSAGE: ends the case as failed, naming the line of the case that failed.
_fail() {
    local i caller=""
    for ((i = 1; i < ${#BASH_SOURCE[@]}; i++)); do
        if [[ ${BASH_SOURCE[$i]} != "${BASH_SOURCE[0]}" ]]; then
            caller="$(basename "${BASH_SOURCE[$i]}"):${BASH_LINENO[$((i - 1))]}"
            break
        fi
    done
    echo "FAIL${caller:+ ($caller)}: $*" >&2
    exit 1
}

# _skip REASON: ends the case as skipped (exit 77). Never for the whole suite's reasons
# (no /dev/fuse): those fail loudly.
_skip() {
    echo "SKIP: $*" >&2
    exit 77
}

_ok() {
    _CFS_CHECKS=$((_CFS_CHECKS + 1))
    local msg=$*
    echo "  ok $_CFS_CHECKS - ${msg//$TEST_ROOT/\$R}"
}

# MARK: - Assertions

# _assert_eq EXPECTED ACTUAL [WHAT]
_assert_eq() {
    [[ $1 == "$2" ]] || _fail "${3:-value}: expected '$1', got '$2'"
    _ok "${3:-value} = '$1'"
}

# _assert_ne UNEXPECTED ACTUAL [WHAT]
_assert_ne() {
    [[ $1 != "$2" ]] || _fail "${3:-value}: expected anything but '$1'"
    _ok "${3:-value} != '$1'"
}

# _assert_ok CMD...: CMD succeeds (its output is shown when it does not).
_assert_ok() {
    local out rc=0
    out=$("$@" 2>&1) || rc=$?
    ((rc == 0)) || _fail "$*: exit $rc: $out"
    _ok "$*"
}

# _assert_output EXPECTED CMD...: CMD succeeds and prints exactly EXPECTED.
_assert_output() {
    local want=$1 out rc=0
    shift
    out=$("$@" 2>&1) || rc=$?
    ((rc == 0)) || _fail "$*: exit $rc: $out"
    [[ $out == "$want" ]] || _fail "$*: expected output '$want', got '$out'"
    _ok "$* -> '$want'"
}

# _assert_exit CODE CMD...: CMD exits with CODE; its stdout+stderr is left in $_OUT.
_OUT=""
_assert_exit() {
    local want=$1 rc=0
    shift
    _OUT=$("$@" 2>&1) || rc=$?
    ((rc == want)) || _fail "$*: expected exit $want, got $rc: $_OUT"
    _ok "$* exits $want"
}

# _assert_errno ERRNO_NAME CMD...: CMD fails with exactly that errno.
# With `fsop` (lib/bin/fsop) the errno's name is compared; any other command must fail and
# print the errno's message (strerror), which is how coreutils report a failed call.
_assert_errno() {
    local want=$1 out rc=0 last msg
    shift
    out=$("$@" 2>&1) || rc=$?
    last=${out##*$'\n'}
    if [[ $last =~ ^E[A-Z0-9]+$ ]]; then
        [[ $last == "$want" ]] || _fail "$*: expected $want, got $last"
    elif ((rc == 0)); then
        _fail "$*: succeeded (output '$out'), expected $want"
    else
        msg=$(fsop strerror "$want")
        [[ $out == *"$msg"* ]] || _fail "$*: expected $want ($msg), got exit $rc: $out"
    fi
    _ok "$* -> $want"
}

# _assert_exists PATH / _assert_missing PATH (lstat: a dangling symlink exists)
_assert_exists() {
    [[ -e $1 || -L $1 ]] || _fail "$1: expected to exist"
    _ok "exists: $1"
}
_assert_missing() {
    [[ ! -e $1 && ! -L $1 ]] || _fail "$1: expected not to exist"
    _ok "missing: $1"
}

# MARK: - Mounts

declare -A _CFS_PID=()   # mount point -> pid of the foreground daemon fs_mount started
_CFS_PIDS=()
_CFS_N=0
_CFS_WRAP=()

# _mount_fstype MNT: the type of the topmost mount exactly at MNT ("" if none).
_mount_fstype() {
    awk -v m="$1" '{
        mp = $5; gsub(/\\040/, " ", mp); gsub(/\\011/, "\t", mp); gsub(/\\134/, "\\", mp)
        if (mp == m) { t = ""; for (i = 7; i <= NF; i++) if ($i == "-") { t = $(i + 1); break }; last = t }
    } END { if (last != "") print last }' /proc/self/mountinfo
}

# _mount_line MNT: the mountinfo line of the topmost mount at MNT.
_mount_line() {
    awk -v m="$1" '{ mp = $5; gsub(/\\040/, " ", mp); if (mp == m) last = $0 } END { print last }' /proc/self/mountinfo
}

_is_mounted() {
    [[ $(_mount_fstype "$1") == fuse* ]]
}

# _mounts_under DIR: every fuse mount point at or below DIR, deepest first.
_mounts_under() {
    awk -v d="$1" '{
        mp = $5; gsub(/\\040/, " ", mp)
        t = ""; for (i = 7; i <= NF; i++) if ($i == "-") { t = $(i + 1); break }
        if (t ~ /^fuse/ && (mp == d || index(mp, d "/") == 1)) print mp
    }' /proc/self/mountinfo | sort -r | uniq
}

# _wait_for SECONDS CMD...: polls CMD every 50 ms until it succeeds.
_wait_for() {
    local limit=$1 i
    shift
    for ((i = 0; i < limit * 20; i++)); do
        "$@" && return 0
        sleep 0.05
    done
    return 1
}

# _shows EXPECTED PATH: whether PATH reads as EXPECTED now (for _wait_for).
_shows() {
    [[ $(cat "$2" 2>/dev/null) == "$1" ]]
}

_pid_running() {
    local state
    state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
    [[ -n $state && $state != Z && $state != X ]]
}

# fs_mount [ARGS...]: mounts $TEST_STORE at $TEST_MNT (see fs_mount_at).
_staging_clear() { [[ ! -d $1/.staging || -z $(ls -A "$1/.staging" 2>/dev/null) ]]; }

fs_mount() {
    fs_mount_at "$TEST_STORE" "$TEST_MNT" "$@"
}

# fs_mount_at STORE MNT [ARGS...]: starts `containerfs mount STORE MNT -f ARGS` in the
# background, waits until the mount shows in /proc/self/mountinfo, and fails at once,
# with the daemon's output, if the daemon dies first (libfuse's fuse_wait_mount).
fs_mount_at() {
    local store=$1 mnt
    mnt=$(realpath -m "$2")
    shift 2
    mkdir -p "$store" "$mnt"
    _CFS_N=$((_CFS_N + 1))
    local log="$TEST_TMP/daemon.$_CFS_N.log"
    # A daemon started from a terminal has SIGINT and SIGQUIT at their defaults; a script's
    # `&` would have them ignored, and libfuse leaves ignored signals alone.
    # _CFS_WRAP: a command the daemon runs under (e.g. `taskset -c 0`), if any.
    # CFS_MOUNT_OPTIONS: options every such mount gets (run.sh: the suite in a mode).
    env --default-signal=INT,QUIT "${_CFS_WRAP[@]}" "$CONTAINERFS" mount "$store" "$mnt" -f "$@" \
        ${CFS_MOUNT_OPTIONS:+-o "$CFS_MOUNT_OPTIONS"} >"$log" 2>&1 &
    local pid=$! i rc
    _CFS_PID[$mnt]=$pid
    _CFS_PIDS+=("$pid")
    for ((i = 0; i < 400; i++)); do
        if _is_mounted "$mnt"; then
            _ok "mounted $mnt (daemon pid $pid)"
            # A live daemon deletes the crash debris of `.staging/` in the background; cases
            # assert what a store holds once that is done.
            _wait_for 60 _staging_clear "$store" || _fail "$store/.staging: crash debris still there 60 s after the mount"
            return 0
        fi
        if ! _pid_running "$pid"; then
            rc=0
            wait "$pid" || rc=$?
            _fail "daemon for $mnt died (exit $rc) before the mount was live: $(cat "$log")"
        fi
        sleep 0.025
    done
    _fail "$mnt: not mounted after 10 s: $(cat "$log")"
}

# fs_mount_mode MODE: mounts a store of the mode's own, $TEST_TMP/store-MODE (set as
# $MODE_STORE), at $TEST_MNT; MODE is `default` or a mount option (`writeback`), for cases
# that run once per mode.
fs_mount_mode() {
    MODE_STORE=$TEST_TMP/store-$1
    if [[ $1 == default ]]; then fs_mount_at "$MODE_STORE" "$TEST_MNT"; else fs_mount_at "$MODE_STORE" "$TEST_MNT" -o "$1"; fi
}

# fs_umount [MNT]: `fusermount3 -u`, then waits for the daemon fs_mount started to exit
# with status 0 and for the mount to be gone.
fs_umount() {
    local mnt
    mnt=$(realpath -m "${1:-$TEST_MNT}")
    local out rc=0
    out=$(fusermount3 -u "$mnt" 2>&1) || rc=$?
    ((rc == 0)) || _fail "fusermount3 -u $mnt: exit $rc: $out"
    _wait_daemon "$mnt"
    _wait_for 10 eval '! _is_mounted "$mnt"' || _fail "$mnt: still mounted after unmount"
    _ok "unmounted $mnt"
}

# _wait_daemon MNT: waits (10 s) for the foreground daemon of MNT to exit; it must exit 0.
_wait_daemon() {
    local mnt=$1 pid rc=0
    pid=${_CFS_PID[$mnt]:-}
    [[ -n $pid ]] || return 0
    _wait_for 10 eval '! _pid_running "$pid"' || _fail "daemon $pid of $mnt still running 10 s after unmount"
    wait "$pid" || rc=$?
    unset "_CFS_PID[$mnt]"
    ((rc == 0)) || _fail "daemon of $mnt exited with status $rc: $(cat "$TEST_TMP"/daemon.*.log 2>/dev/null | tail -5)"
}

# _daemon_pid MNT: the pid of the daemon fs_mount started for MNT.
_daemon_pid() {
    echo "${_CFS_PID[$(realpath -m "${1:-$TEST_MNT}")]:-}"
}

# _process_gone PID: the process has no thread left (a zombie, or reaped). /proc/PID/stat
# says Z as soon as the main thread is gone, while other threads may still be alive.
_process_gone() {
    [[ ! -d /proc/$1 ]] || { [[ $(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) == Z ]] && (($(ls "/proc/$1/task" | wc -l) <= 1)); }
}

# _kill_daemon MNT GRACE: kill -9 of the mount's daemon, then what the README tells a user
# to do: `containerfs unmount MNT` (it aborts the dead connection). A daemon killed while one
# of its threads waits for a request to its own mount cannot finish dying by itself; sets
# _KILLED_STUCK to 1 when it was not gone within GRACE seconds of the kill, else 0.
_kill_daemon() {
    local mnt pid rc=0 out
    mnt=$(realpath -m "$1")
    pid=$(_daemon_pid "$mnt")
    [[ -n $pid ]] || _fail "no daemon to kill"
    kill -KILL "$pid"
    _KILLED_STUCK=0
    _wait_for "$2" _process_gone "$pid" || _KILLED_STUCK=1
    out=$(containerfs unmount "$mnt" 2>&1) || _fail "containerfs unmount of the dead mount failed: $out"
    _wait_for 10 _process_gone "$pid" || _fail "daemon $pid alive 10 s after the unmount"
    wait "$pid" 2>/dev/null || rc=$?
    ((rc == 137)) || _fail "daemon exit status $rc, expected 137 (SIGKILL)"
    unset "_CFS_PID[$mnt]"
    _wait_for 10 eval '! _is_mounted "$mnt"' || _fail "$mnt: the dead mount is still there"
}

# _pause_random MAX: sleeps a random time in [0, MAX) seconds (MAX a decimal); sets KILL_AT.
_pause_random() {
    local t
    t=$(awk -v m="$1" -v r="$RANDOM" 'BEGIN { printf "%.3f", m * r / 32768 }')
    KILL_AT=${t}s
    sleep "$t"
}

# _force_unmount MNT: what the trap does: a clean unmount, else abort the connection and
# unmount lazily (a hung daemon must never keep a test's mount alive). Requests still
# waiting for the daemon (a case that failed while one was parked) abort it first: a
# notification of the daemon's may wait for a lock such a request holds, and a daemon
# killed in that state could never exit (DESIGN.md 35).
_force_unmount() {
    local mnt=$1 dev conn
    dev=$(awk -v m="$mnt" '{ mp = $5; gsub(/\\040/, " ", mp); if (mp == m) d = $3 } END { print d }' /proc/self/mountinfo)
    conn=/sys/fs/fuse/connections/${dev#*:}
    [[ -n $dev && -d $conn ]] || mount -t fusectl none /sys/fs/fuse/connections 2>/dev/null || true
    if [[ -n $dev && -w $conn/abort && $(cat "$conn/waiting" 2>/dev/null) != 0 ]]; then
        echo 1 >"$conn/abort" 2>/dev/null || true
    fi
    fusermount3 -u "$mnt" 2>/dev/null && return 0
    if [[ -n $dev && -w $conn/abort ]]; then
        echo 1 >"$conn/abort" 2>/dev/null || true
    fi
    fusermount3 -u -z "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
}

_cfs_cleanup() {
    local rc=$? m pid
    set +e
    trap - EXIT
    for m in $(_mounts_under "$TEST_ROOT") "${!_CFS_PID[@]}"; do
        _is_mounted "$m" && _force_unmount "$m"
    done
    for pid in "${_CFS_PIDS[@]}"; do
        _wait_for 5 eval '! _pid_running "$pid"' || { kill -TERM "$pid" 2>/dev/null; sleep 0.5; kill -KILL "$pid" 2>/dev/null; }
        wait "$pid" 2>/dev/null
    done
    if [[ -n ${_CFS_OWN_ROOT:-} ]]; then
        rm -rf "$TEST_ROOT"
    fi
    exit "$rc"
}
trap _cfs_cleanup EXIT

# _loop_fs SIZE MNT MKFS [ARGS...]: a file system of its own for a case: an image of SIZE in
# $TEST_TMP on a loop device, made with `MKFS ARGS... DEVICE` and mounted at MNT; skips the
# case when no loop device can be had. At exit the ContainerFS mounts go first (their stores
# may be on it), then MNT, then the loop device.
_LOOP_DEV="" _LOOP_MNT=""
_loop_fs() {
    local size=$1 img
    _LOOP_MNT=$2
    shift 2
    img=$TEST_TMP/loop-fs.img
    truncate -s "$size" "$img"
    _LOOP_DEV=$(losetup -f --show "$img" 2>&1) || { local why=$_LOOP_DEV; _LOOP_DEV=""; _skip "no loop device to attach an image to (losetup -f: $why)"; }
    trap _loop_fs_cleanup EXIT
    _assert_ok "$@" "$_LOOP_DEV"
    mkdir -p "$_LOOP_MNT"
    _assert_ok mount "$_LOOP_DEV" "$_LOOP_MNT"
}

_loop_fs_cleanup() {
    local rc=$? m
    set +e
    for m in $(_mounts_under "$TEST_ROOT") "${!_CFS_PID[@]}"; do
        _is_mounted "$m" && _force_unmount "$m"
    done
    for m in "${_CFS_PIDS[@]}"; do
        _wait_for 5 eval '! _pid_running "$m"' || kill -KILL "$m" 2>/dev/null
    done
    mountpoint -q "$_LOOP_MNT" && { umount "$_LOOP_MNT" || umount -l "$_LOOP_MNT"; }
    [[ -n $_LOOP_DEV ]] && losetup -d "$_LOOP_DEV"
    (exit "$rc")
    _cfs_cleanup
}
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# MARK: - Containers

# _mkcontainer ID [MNT]: creates container ID through the mount (`mkdir containers/ID`)
# and prints its path under the mount.
_mkcontainer() {
    local id=$1 mnt=${2:-$TEST_MNT}
    mkdir "$mnt/containers/$id" || _fail "mkdir containers/$id failed"
    echo "$mnt/containers/$id"
}

# _open_documents ID: creates container ID through the mount and prints the path of its
# Documents directory, opened to every user (container 755, Documents 777), for cases whose
# other users write there.
_open_documents() {
    local c
    c=$(_mkcontainer "$1") || return 1
    chmod 755 "$c" && chmod 777 "$c/Documents" || _fail "cannot open $c/Documents to every user"
    echo "$c/Documents"
}

# _bundle_name ID: the bundle directory's name: the last label, capitalised, + .app.
_bundle_name() {
    local last=${1##*.}
    echo "${last^}.app"
}

# MARK: - Users

# _ensure_user NAME: creates a system user NAME (own group, no home) if missing.
_ensure_user() {
    id -u "$1" >/dev/null 2>&1 && return 0
    useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$1" >/dev/null 2>&1 ||
        id -u "$1" >/dev/null 2>&1 || _fail "cannot create user $1"
}

# _users: two unprivileged users, $U1/$U1_UID/$U1_GID and $U2/..., created if missing.
_users() {
    U1=cfstest1 U2=cfstest2
    _ensure_user "$U1"
    _ensure_user "$U2"
    U1_UID=$(id -u "$U1") U1_GID=$(id -g "$U1") U2_UID=$(id -u "$U2") U2_GID=$(id -g "$U2")
}

# _as_user USER CMD...: runs CMD with USER's uid and primary gid, no supplementary groups,
# no capabilities, a system PATH (plus the binary and fsop) and HOME=/.
_as_user() {
    local user=$1
    shift
    setpriv --reuid="$(id -u "$user")" --regid="$(id -g "$user")" --clear-groups --inh-caps=-all -- \
        env HOME=/ PATH="$_CFS_USER_PATH" "$@"
}

# _as_ids UID GID CMD...: the same for bare numbers.
_as_ids() {
    local uid=$1 gid=$2
    shift 2
    setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all -- env HOME=/ PATH="$_CFS_USER_PATH" "$@"
}

# MARK: - Requirements

# _require_fuse: /dev/fuse must be usable. Fails (never skips): a skipped suite proves nothing.
_require_fuse() {
    [[ -c /dev/fuse ]] || _fail "/dev/fuse is missing"
    { exec 9<>/dev/fuse; } 2>/dev/null || _fail "/dev/fuse cannot be opened"
    exec 9>&-
}

# _require_cmd CMD...: fails when a tool the case needs is missing (install it; see run.sh).
_require_cmd() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || _fail "required tool '$c' is not installed"
    done
}

_require_root() {
    ((EUID == 0)) || _skip "needs root"
}
