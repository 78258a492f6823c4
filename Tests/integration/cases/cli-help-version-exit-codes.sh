# --version and --help; exit codes 0 success, 1 operation failed (message on stderr naming
# the path and the reason, nothing on stdout), 2 usage error (docs/SEMANTICS.md §2).
. "$(dirname "$0")/../lib/common.sh"

_assert_exit 0 containerfs --version
[[ $_OUT =~ ^containerfs\ [0-9]+\.[0-9]+\.[0-9]+$'\n'libfuse\ 3\.[0-9]+\.[0-9]+$'\n' ]] || _fail "--version prints '$_OUT'"
[[ $_OUT == *"libfuse $(pkg-config --modversion fuse3)"* ]] || _fail "--version names another libfuse: $_OUT"
_assert_exit 0 containerfs --help
[[ $(tr -s '\n ' '  ' <<<"$_OUT") == *"Exit status: 0 success, 1 the operation failed (stderr names the path and the reason), 2 usage error."* ]] ||
    _fail "--help does not state the exit codes: $_OUT"
for word in mount unmount status container USAGE; do
    [[ $_OUT == *"$word"* ]] || _fail "--help does not mention $word: $_OUT"
done
_assert_exit 0 containerfs help mount
_assert_exit 0 containerfs help container create
# help of a word that names no subcommand is a usage error (it printed the nearest help, exit 0)
_assert_exit 2 containerfs help nosuch
[[ $_OUT == *"'nosuch' is not a subcommand of containerfs (mount, unmount, status, container, trash, snapshot, inbox, purge, exclude, run, coordinate, watch)"* ]] || _fail "help nosuch: $_OUT"
_assert_exit 2 containerfs help container nosuch
[[ $_OUT == *"'nosuch' is not a subcommand of container (create, list, remove, path)"* ]] || _fail "help container nosuch: $_OUT"
_assert_exit 0 containerfs mount --help
for word in allow_other default_permissions ro auto_unmount fsname subtype -f; do
    [[ $_OUT == *"$word"* ]] || _fail "mount --help does not mention $word"
done
_assert_exit 0 containerfs container --help
for sub in create list remove path; do
    _assert_exit 0 containerfs container "$sub" --help
done
_assert_exit 0 containerfs unmount --help
for sub in "inbox deliver" purge exclude run; do
    # shellcheck disable=SC2086
    _assert_exit 0 containerfs $sub --help
done

# MARK: operation failed: 1, message on stderr naming the path and the reason, stdout empty
check_failure() {   # check_failure NEEDLE CMD...
    local needle=$1 out err rc=0
    shift
    out=$("$@" 2>"$TEST_TMP/err") || rc=$?
    err=$(cat "$TEST_TMP/err")
    ((rc == 1)) || _fail "$*: expected exit 1, got $rc"
    [[ -z $out ]] || _fail "$*: printed on stdout: $out"
    [[ $err == *"$needle"* ]] || _fail "$*: stderr does not name '$needle': $err"
    [[ $err == *": "* ]] || _fail "$*: stderr gives no reason: $err"
    _ok "$* -> 1: $err"
}
check_failure "$TEST_TMP/nowhere" containerfs mount "$TEST_STORE" "$TEST_TMP/nowhere"
check_failure "$TEST_TMP/nowhere" containerfs unmount "$TEST_TMP/nowhere"
check_failure "$TEST_MNT" containerfs unmount "$TEST_MNT"
check_failure "$TEST_STORE" containerfs container remove com.example.none --store "$TEST_STORE"   # not a store yet
_assert_ok containerfs container create com.example.made --store "$TEST_STORE"
check_failure com.example.none containerfs container remove com.example.none --store "$TEST_STORE"

# MARK: usage errors: 2 (every one is tried; all wrong ones are listed)
wrong=()
usage() {
    local rc=0
    "$@" >/dev/null 2>&1 || rc=$?
    if ((rc == 2)); then _ok "$* -> 2"; else wrong+=("'$*' exits $rc"); fi
}
usage containerfs --no-such-flag
usage containerfs mount
usage containerfs mount a b c
usage containerfs mount "$TEST_STORE" "$TEST_MNT" -o
usage containerfs unmount
usage containerfs unmount a b
usage containerfs container create
usage containerfs container list --no-such-flag
usage containerfs container remove
usage containerfs container frobnicate
usage containerfs container path com.example.x --directory no-such-directory --store "$TEST_STORE"
usage containerfs container create bad_id --store "$TEST_STORE"
usage containerfs container remove bad_id --store "$TEST_STORE"
usage containerfs container path bad_id --store "$TEST_STORE"
usage containerfs mount "$TEST_STORE" "$TEST_MNT" -o no_such_option
usage containerfs mount "$TEST_STORE" "$TEST_MNT" -o attr_timeout=soon
usage containerfs status --no-such-flag
usage containerfs status a b
usage env -C "$TEST_TMP" containerfs strayword
((${#wrong[@]} == 0)) || _fail "usage errors must exit 2: ${wrong[*]}"
# the message of a usage error found while running names the argument and the rule
_assert_exit 2 containerfs container create bad_id --store "$TEST_STORE"
_assert_eq "containerfs: bad_id: not a valid bundle identifier (reverse-DNS: letters, digits, '-', at least two labels): invalid argument" "$_OUT" "invalid id"
_assert_exit 2 env -C "$TEST_TMP" containerfs strayword
[[ $_OUT == *"'strayword' is not a subcommand (mount, unmount, status, container, trash, snapshot, inbox, purge, exclude, run, coordinate, watch, help), nor an existing mount point directory"* ]] ||
    _fail "a stray word: $_OUT"

# MARK: a mistyped subcommand is not taken for a new store
# Without a subcommand the arguments are mount's, and mount makes a store that does not
# exist yet: a bare word that names no subcommand and no directory is refused instead, with
# the command that would make such a store, and nothing is made or mounted.
cd "$TEST_TMP"
_assert_exit 2 containerfs stauts "$TEST_MNT"
[[ $_OUT == *"'stauts' is not a subcommand (mount, unmount, status, container, trash, snapshot, inbox, purge, exclude, run, coordinate, watch, help), nor an existing store directory; to make a new store named stauts here: containerfs mount stauts $TEST_MNT"* ]] ||
    _fail "unclear refusal: $_OUT"
[[ ! -e $TEST_TMP/stauts ]] || _fail "a store named stauts was made"
_assert_eq "" "$(_mount_fstype "$TEST_MNT")" "nothing mounted after the refusal"
# An existing store directory, or an explicit mount, is taken as ever.
_assert_ok containerfs mount stauts "$TEST_MNT"
_assert_ok containerfs unmount "$TEST_MNT"
_assert_ok containerfs stauts "$TEST_MNT" -o ro
_assert_eq "fuse.containerfs" "$(_mount_fstype "$TEST_MNT")" "the existing store, mounted without a subcommand"
_assert_ok containerfs unmount "$TEST_MNT"
cd /

# MARK: arguments that are not valid UTF-8 are refused, not changed into other names
# (DESIGN.md 13): `mount $'s\xff/' MNT` made and mounted a new store `s\xEF\xBF\xBD` (the
# replacement character) and left the directory given empty.
bad=$TEST_TMP/s$'\xff'
mkdir "$bad"
want="containerfs: $TEST_TMP/s\\xFF/: not valid UTF-8 (ContainerFS takes paths and names in UTF-8 only: use a name that is)"
_assert_exit 1 containerfs mount "$bad/" "$TEST_MNT"
_assert_eq "$want" "$_OUT" "mount of a non-UTF-8 store: message"
_assert_exit 1 containerfs container list --store "$bad/"
_assert_eq "$want" "$_OUT" "list of a non-UTF-8 store: message"
_assert_exit 1 containerfs container create com.example.x --bundle "$bad/" --store "$TEST_STORE"
_assert_eq "$want" "$_OUT" "create with a non-UTF-8 bundle: message"
_assert_eq "" "$(ls -A "$bad")" "the directory given is left alone"
_assert_missing "$TEST_TMP/s"$'\xef\xbf\xbd'
_assert_eq "" "$(_mount_fstype "$TEST_MNT")" "nothing mounted"
