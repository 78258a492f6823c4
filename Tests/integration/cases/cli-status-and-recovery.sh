# Operating a mount: `status [--json] [MNT]` shows each live mount (store, daemon pid,
# options, uptime, counts of containers, presenters and claims; the kernel's FUSE protocol);
# `--version` adds that protocol for each live mount; -d is -o debug; mounting over a mount
# whose daemon died says ENOTCONN and names the remedy, `containerfs unmount` applies it;
# mounting over a non-empty directory or a live mount warns; `unmount --lazy` detaches a
# busy mount (README, "Troubleshooting").
. "$(dirname "$0")/../lib/common.sh"
M=$TEST_MNT S=$TEST_STORE
json() { "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(*[eval(a, {"d": d}) for a in sys.argv[1:]])' "$@"; }

# MARK: status and --version of a live mount
_assert_eq "0" "$(containerfs status --json | json 'len([m for m in d if m["mountPoint"] == "'"$M"'"])')" "status before the mount"
_assert_ok containerfs mount "$S" "$M" -o attr_timeout=5,nonempty -d
_assert_ok containerfs container create com.example.one --store "$S"
_assert_ok containerfs container create com.example.two --store "$S"
pid=$(containerfs status --json "$M" | json 'd[0]["pid"]')
[[ $(tr '\0' ' ' <"/proc/$pid/cmdline") == *" mount $S $M -f "* ]] || _fail "status names pid $pid, not the daemon"
proto=$(containerfs status --json "$M" | json 'd[0]["fuseProtocol"]')
[[ $proto =~ ^7\.[0-9]+$ ]] || _fail "kernel FUSE protocol '$proto'"
_assert_eq "$M $S True attr_timeout=5,nonempty,debug 2 0 0 True True" \
    "$(containerfs status --json "$M" | json 'd[0]["mountPoint"]' 'd[0]["store"]' 'd[0]["alive"]' '",".join(d[0]["options"])' 'd[0]["containers"]' 'd[0]["presenters"]' 'd[0]["claims"]' 'isinstance(d[0]["uptime"], int)' 'd[0]["libfuse"] == "'"$(pkg-config --modversion fuse3)"'"')" \
    "status --json of the mount"
# a presenter and a claim are counted while they last
containerfs watch --json "$M/containers/com.example.one/Documents" >/dev/null &
watcher=$!
containerfs coordinate --read "$M/containers/com.example.two/Documents" -- sleep 30 &
holder=$!
_wait_for 10 eval '[[ $(containerfs status --json "$M" | json "d[0][\"presenters\"]" "d[0][\"claims\"]") == "1 1" ]]' ||
    _fail "status counts: $(containerfs status --json "$M")"
kill "$watcher" "$holder"; wait "$watcher" "$holder" 2>/dev/null || true
_wait_for 10 eval '[[ $(containerfs status --json "$M" | json "d[0][\"presenters\"]" "d[0][\"claims\"]") == "0 0" ]]' ||
    _fail "counts after the presenter and the claim ended: $(containerfs status --json "$M")"
_assert_exit 0 containerfs status "$M"
for line in "$M" "  store:      $S" "  options:    attr_timeout=5,nonempty,debug" "  containers: 2, presenters: 0, claims: 0"; do
    grep -qxF -- "$line" <<<"$_OUT" || _fail "status does not show '$line': $_OUT"
done
[[ $_OUT == *"  daemon:     pid $pid, up "* && $_OUT == *"kernel FUSE protocol $proto"* ]] || _fail "status: $_OUT"
_assert_exit 0 containerfs --version
grep -qxF "kernel FUSE protocol $proto (mount $M)" <<<"$_OUT" || _fail "--version does not name the live mount's protocol: $_OUT"
_assert_exit 1 containerfs status "$TEST_TMP"
_assert_eq "containerfs: $TEST_TMP: not a containerfs mount" "$_OUT" "status of a directory that is no mount"

# MARK: mounting over a live mount, or a non-empty directory, warns
_assert_exit 1 containerfs mount "$S" "$M"   # the same store: refused by its lock
[[ $_OUT == *"containerfs: warning: $M: already a live ContainerFS mount (of $S); the new mount hides it until unmounted"* ]] ||
    _fail "no warning over a live mount: $_OUT"
_assert_ok containerfs unmount "$M"
touch "$M/left-behind"
_assert_exit 0 containerfs mount "$S" "$M"
_assert_eq "containerfs: warning: $M: not empty; what it holds is hidden while the store is mounted there" "$_OUT" "warning over a non-empty directory"
_assert_ok containerfs unmount "$M"
rm "$M/left-behind"
_assert_exit 0 containerfs mount "$S" "$M"
_assert_eq "" "$_OUT" "no warning over an empty directory"

# MARK: a mount whose daemon died: ENOTCONN and the remedy; unmount applies it
pid=$(containerfs status --json "$M" | json 'd[0]["pid"]')
kill -KILL "$pid"
_wait_for 10 eval '! _pid_running "$pid"' || _fail "daemon $pid survived SIGKILL"
_assert_errno ENOTCONN fsop stat "$M"
_assert_exit 1 containerfs mount "$S" "$M"
_assert_eq "containerfs: $M: the daemon of the mount here is gone (transport endpoint is not connected, ENOTCONN): run containerfs unmount $M" "$_OUT" "mount over a dead mount"
_assert_exit 1 containerfs status "$M"
[[ $_OUT == *"daemon:     not responding (run containerfs unmount $M)"* ]] || _fail "status of a dead mount: $_OUT"
_assert_ok containerfs unmount "$M"
_assert_eq "" "$(_mount_fstype "$M")" "the dead mount is gone"
_assert_ok containerfs mount "$S" "$M"

# MARK: unmount --lazy: a busy mount is detached at once, and goes when last used
exec 7<"$M/containers/com.example.one/Documents"
_assert_exit 1 containerfs unmount "$M"
[[ $_OUT == *"unmount failed"*"(in use: close what uses it, or containerfs unmount --lazy)"* ]] || _fail "busy unmount: $_OUT"
_assert_ok containerfs unmount --lazy "$M"
_assert_eq "" "$(_mount_fstype "$M")" "detached at once"
exec 7<&-
_wait_for 10 eval '[[ -z $(containerfs status --json | json "[m for m in d if m[\"store\"] == \"'"$S"'\"]" | tr -d "[]") ]] && ! _pid_running '"$pid" ||
    _fail "the lazily unmounted daemon did not exit"
_wait_for 10 eval '! fuser -s "$S/.lock" 2>/dev/null' || true
_assert_ok containerfs mount "$S" "$M"
_assert_ok containerfs unmount "$M"
