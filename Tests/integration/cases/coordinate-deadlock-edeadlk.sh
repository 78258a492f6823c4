# A cycle between explicit claims fails exactly one waiter with EDEADLK, at once, as POSIX
# F_SETLKW does; the others go on once its claim ends: two `coordinate` commands each
# holding one file and touching the other's (write/write and read/write), and a cycle of
# three (docs/SEMANTICS.md §3.1).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/coordination.sh"
fs_mount
C=$(_mkcontainer com.example.deadlock)
D=$C/Documents
for n in 1 2 3; do echo "content $n" >"$D/f$n"; done
DEADLK=$(fsop strerror EDEADLK)

# crossing ROUND MODE-ARGS CMD N...: for each N in order, starts
#     containerfs coordinate MODE-ARGS fN -- sh -c 'wait until every claim is held; CMD f(N+1)'
# (the last one touches f of the first), so that the claims form a cycle once every
# command runs its CMD. Then waits for all; leaves their exit statuses in RCS[N] and their
# output in $TEST_TMP/ROUND.N.out.
declare -A RCS=()
crossing() {
    local round=$1 mode=$2 cmd=$3
    shift 3
    local ns=("$@") n next i pids=()
    local dir=$TEST_TMP/$round
    mkdir "$dir"
    for ((i = 0; i < ${#ns[@]}; i++)); do
        n=${ns[$i]}
        next=${ns[$(((i + 1) % ${#ns[@]}))]}
        # shellcheck disable=SC2086,SC2016
        containerfs coordinate $mode "$D/f$n" -- sh -c '
            touch "$1/held.$2"; i=0
            while [ "$(ls "$1" | grep -c "^held\.")" -lt "$3" ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done
            '"$cmd"' "$4"' sh "$dir" "$n" "${#ns[@]}" "$D/f$next" >"$TEST_TMP/$round.$n.out" 2>&1 &
        pids+=($!)
        _CFS_PIDS+=("${pids[-1]}")
    done
    for ((i = 0; i < ${#ns[@]}; i++)); do
        _finish "${pids[$i]}" "$round: coordinate $mode f${ns[$i]} -- $cmd f$(( ${ns[$(((i + 1) % ${#ns[@]}))]} ))"
        RCS[${ns[$i]}]=$_RC
    done
}

# exactly_one_deadlock ROUND cat|quiet N...: exactly one command failed with EDEADLK (its
# CMD's message names it; `coordinate` exits with CMD's status); every other one succeeded
# and printed the content of the next file (cat) or nothing (quiet).
exactly_one_deadlock() {
    local round=$1 expect=$2
    shift 2
    local ns=("$@") i n next out dead=0 ok=0
    for ((i = 0; i < ${#ns[@]}; i++)); do
        n=${ns[$i]}
        next=${ns[$(((i + 1) % ${#ns[@]}))]}
        out=$(cat "$TEST_TMP/$round.$n.out")
        if ((RCS[$n] != 0)) && [[ $out == *"$DEADLK"* ]]; then
            dead=$((dead + 1))
        elif ((RCS[$n] == 0)) && [[ $out == "$([[ $expect == cat ]] && echo "content $next")" ]]; then
            ok=$((ok + 1))
        else
            _fail "$round: command on f$n: exit ${RCS[$n]}: $out"
        fi
    done
    ((dead == 1)) || _fail "$round: $dead of ${#ns[@]} commands got EDEADLK: $(tail -n +1 "$TEST_TMP/$round".*.out)"
    _ok "$round: exactly one EDEADLK ($DEADLK), $ok completed"
}

# MARK: write + write, crossing (three rounds)
for r in 1 2 3; do
    crossing "ww$r" --write cat 1 2
    exactly_one_deadlock "ww$r" cat 1 2
done

# MARK: read + write, crossing: each holds a read claim and writes the other's file
crossing rw --read "echo written >" 1 2
exactly_one_deadlock rw quiet 1 2
# The survivor's write happened, the loser's did not.
written=0
for n in 1 2; do [[ $(cat "$D/f$n") == written ]] && written=$((written + 1)); done
_assert_eq 1 "$written" "files written by the crossing read/write commands"
for n in 1 2; do echo "content $n" >"$D/f$n"; done

# MARK: a cycle of three
crossing three --write cat 1 2 3
exactly_one_deadlock three cat 1 2 3

# MARK: no claim is left: every file is free at once
for n in 1 2 3; do
    _assert_ok timeout 2 fsop open "$D/f$n" "O_WRONLY|O_NONBLOCK"
done
fs_umount
