# shellcheck shell=bash
# Verbs for the coordination cases (docs/SEMANTICS.md §3): explicit
# claims held by `containerfs coordinate`, presenters started with `containerfs watch`, and
# callers parked in the daemon. Sourced after common.sh:
#     . "$(dirname "$0")/../lib/coordination.sh"
#
# Nothing here sleeps to let time pass: every verb polls for the condition it names.

declare -A _HOLD_PID=() _WATCH_PID=()

# _cfail MESSAGE: _fail, naming the line of the case that called into this file.
_cfail() {
    local i where=""
    for ((i = 1; i < ${#BASH_SOURCE[@]}; i++)); do
        if [[ ${BASH_SOURCE[$i]} != */lib/* ]]; then
            where="$(basename "${BASH_SOURCE[$i]}"):${BASH_LINENO[$((i - 1))]}: "
            break
        fi
    done
    _fail "$where$*"
}

# MARK: - Claims

# _hold NAME COORDINATE-ARGS... PATH [-- SCRIPT]: starts `containerfs coordinate ARGS PATH
# -- CMD` in the background and returns once CMD runs, that is once the claim is granted.
# CMD runs SCRIPT (sh; the claim's purpose: it must never wait for its own claim) if given,
# touches $TEST_TMP/claim.NAME.held, then waits for `_release NAME` (or for its
# `coordinate` to go, or 60 s). Its output goes to $TEST_TMP/claim.NAME.log.
_hold() {
    local name=$1 pid script=: args=()
    shift
    while (($#)); do
        if [[ $1 == -- ]]; then
            script=$2
            break
        fi
        args+=("$1")
        shift
    done
    local held=$TEST_TMP/claim.$name.held go=$TEST_TMP/claim.$name.release
    rm -f "$held" "$go"
    # shellcheck disable=SC2016
    containerfs coordinate "${args[@]}" -- sh -c '{ eval "$3"; } || exit; touch "$1"; i=0
        while [ ! -e "$2" ] && [ $i -lt 3000 ] && kill -0 "$PPID" 2>/dev/null; do sleep 0.02; i=$((i + 1)); done' \
        sh "$held" "$go" "$script" >"$TEST_TMP/claim.$name.log" 2>&1 &
    pid=$!
    _HOLD_PID[$name]=$pid
    _CFS_PIDS+=("$pid")
    _wait_for 10 eval '[[ -e $held ]] || ! _pid_running $pid' || _cfail "coordinate ${args[*]}: no claim after 10 s: $(cat "$TEST_TMP/claim.$name.log")"
    [[ -e $held ]] || _cfail "coordinate ${args[*]}: ended without holding: $(cat "$TEST_TMP/claim.$name.log")"
    local what="coordinate ${args[*]}"
    [[ $script == : ]] || what+=" -- $script"
    _ok "claim $name held: ${what//$TEST_ROOT/\$R}"
}

# _release NAME: ends the command of `_hold NAME`; its `coordinate` must exit 0 (10 s).
_release() {
    local name=$1 pid rc=0
    pid=${_HOLD_PID[$name]:?no claim named $1}
    touch "$TEST_TMP/claim.$name.release"
    _wait_for 10 eval '! _pid_running $pid' || _cfail "claim $name: coordinate still running 10 s after release"
    wait "$pid" || rc=$?
    unset "_HOLD_PID[$name]"
    ((rc == 0)) || _cfail "claim $name: coordinate exited $rc: $(cat "$TEST_TMP/claim.$name.log")"
    _ok "claim $name released"
}

# MARK: - Parked callers

# _parked PID: PID is inside a system call waiting for the daemon's answer to a FUSE
# request (its wchan is the kernel's request_wait_answer): the daemon has parked it.
_parked() {
    [[ $(cat "/proc/$1/wchan" 2>/dev/null) == request_wait_answer ]]
}

# _all_parked PID...: every PID is waiting in the daemon.
_all_parked() {
    local p
    for p in "$@"; do _parked "$p" || return 1; done
}

# _wait_parked PID WHAT: PID reaches a parked FUSE request (10 s) and has not finished.
_wait_parked() {
    local pid=$1 what=$2
    _wait_for 10 eval '_parked $pid || ! _pid_running $pid' || _cfail "$what: not waiting in the daemon after 10 s (wchan $(cat "/proc/$pid/wchan" 2>/dev/null))"
    _pid_running "$pid" || _cfail "$what: finished instead of waiting"
    _ok "$what: waits (parked in the daemon)"
}

# _still_waiting PID WHAT: PID has not finished yet.
_still_waiting() {
    _pid_running "$1" || _cfail "$2: finished while it should still wait"
    _ok "$2: still waiting"
}

# _finish PID WHAT: PID ends within 10 s; its exit status is left in $_RC.
_RC=0
_finish() {
    local pid=$1 what=$2
    _wait_for 10 eval '! _pid_running $pid' || _cfail "$what: still running 10 s later"
    _RC=0
    wait "$pid" || _RC=$?
    _ok "$what: finished (exit $_RC)"
}

# MARK: - Presenters

# _presenters [STORE]: the live presenters of the daemon serving STORE, one "UID PATH" a
# line (PATH relative to the mount, with its leading /), from presenter.list over the
# control socket (root sees everybody's).
_presenters() {
    "$PY" - "${1:-$TEST_STORE}/control.sock" <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b'{"v": 1, "id": 1, "op": "presenter.list", "args": {}}\n')
r = json.loads(s.makefile().readline())
if not r.get("ok"):
    sys.exit("presenter.list: %s" % r)
for p in r["result"]["items"] if "result" in r else r["items"]:
    print(p["uid"], p["path"])
EOF
}

# _presenter_count PATH [STORE]: how many presenters of PATH (under $TEST_MNT) are live.
_presenter_count() {
    local rel=/${1#"$TEST_MNT"/}
    _presenters "${2:-$TEST_STORE}" | awk -v p="$rel" '{ sub(/^[^ ]+ /, ""); if ($0 == p) n++ } END { print n + 0 }'
}

# _watch NAME PATH [WATCH-ARGS...]: starts `containerfs watch PATH --json ARGS` in the
# background (output in $TEST_TMP/watch.NAME.out) and returns once the daemon lists it.
# _watch_as USER NAME PATH [WATCH-ARGS...]: the same, run as USER.
_watch() {
    _watch_with "" "$@"
}
_watch_as() {
    _watch_with "$@"
}
_watch_with() {
    local user=$1 name=$2 path=$3 before pid
    shift 3
    local out=$TEST_TMP/watch.$name.out
    before=$(_presenter_count "$path")
    if [[ -n $user ]]; then
        # _as_user's command line, without the function: $! must be the watcher itself.
        setpriv --reuid="$(id -u "$user")" --regid="$(id -g "$user")" --clear-groups --inh-caps=-all -- \
            env HOME=/ PATH="$_CFS_USER_PATH" containerfs watch "$path" --json "$@" >"$out" 2>&1 &
    else
        containerfs watch "$path" --json "$@" >"$out" 2>&1 &
    fi
    pid=$!
    _WATCH_PID[$name]=$pid
    _CFS_PIDS+=("$pid")
    _wait_for 10 eval '(($(_presenter_count "$path") > before)) || ! _pid_running $pid' ||
        _cfail "watch $name: not registered after 10 s: $(cat "$out")"
    _pid_running "$pid" || _cfail "watch $name: exited: $(cat "$out")"
    _ok "watching ${path//$TEST_ROOT/\$R} as $name${user:+ (user $user)}${*:+ ($*)}"
}

# _unwatch NAME [SIGNAL]: stops the watcher NAME (SIGTERM by default).
_unwatch() {
    local pid=${_WATCH_PID[$1]:?no watcher named $1}
    kill -s "${2:-TERM}" "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    unset "_WATCH_PID[$1]"
}

# _events NAME [BASE]: what watcher NAME printed, one line per notification:
#     EVENT PATH [-> TO] [(uncoordinated)]        after-the-fact events
#     request STEP,STEP... PATH                   before-access requests
# with paths relative to BASE (default $TEST_MNT). A line that is not such a JSON object
# is printed as "bad: LINE".
_events() {
    "$PY" - "$TEST_TMP/watch.$1.out" "${2:-$TEST_MNT}" <<'EOF'
import json, os, sys
base = sys.argv[2].rstrip("/") + "/"
rel = lambda p: p[len(base):] if p.startswith(base) else p
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    line = line.rstrip("\n")
    if not line:
        continue
    try:
        o = json.loads(line)
    except ValueError:
        print("bad: " + line)
        continue
    if "request" in o:
        print("request %s %s" % (",".join(o.get("steps", [])), rel(o.get("path", "?"))))
    elif "event" in o:
        s = o["event"] + " " + rel(o.get("path", "?"))
        if "to" in o:
            s += " -> " + rel(o["to"])
        if o.get("uncoordinated"):
            s += " (uncoordinated)"
        print(s)
    else:
        print("bad: " + line)
EOF
}

# _expect_events NAME EXPECTED [BASE] [FILTER]: waits (10 s) until `_events NAME BASE`,
# filtered through the grep -E pattern FILTER if given (e.g. '^(did|subitem)' for events
# only), is exactly EXPECTED; fails with both otherwise.
_expect_events() {
    local name=$1 want=$2 base=${3:-$TEST_MNT} filter=${4:-}
    local got
    _events_now() {
        if [[ -n $filter ]]; then _events "$name" "$base" | grep -E "$filter" || true; else _events "$name" "$base"; fi
    }
    if ! _wait_for 10 eval '[[ $(_events_now) == "$want" ]]'; then
        got=$(_events_now)
        _cfail "watch $name: expected events"$'\n'"$want"$'\n'"--- got ---"$'\n'"$got"
    fi
    local n
    n=$(grep -c '' <<<"$want")
    if ((n > 3)); then
        _ok "watch $name: the $n notifications expected, ending ${want##*$'\n'}"
    else
        _ok "watch $name: ${want//$'\n'/; }"
    fi
}
