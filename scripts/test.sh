#!/usr/bin/env bash
# The whole test suite: dependencies, build, core unit tests (no mount), a smoke run of the
# benchmark (no timing asserted), and last the mounted shell suite (real FUSE mounts), whose
# closing line `N passed, N failed, N skipped` is the run's verdict.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
swift build
# mount(8) runs FUSE helpers with a fixed PATH (/usr/local/bin among it) and looks for
# mount.TYPE helpers in /sbin only: the mount -t and fstab cases need this build in
# /usr/local/bin and its helper beside it and in /sbin. Files installed there before
# (scripts/demo.sh installs them) are put aside for the suite and back after it; ones an
# interrupted run left aside are put back first.
if [[ $(id -u) -eq 0 ]]; then
    restore=()
    link_for_suite() { # TARGET LINK
        local link=$2 saved
        saved=$(dirname "$2")/.$(basename "$2").before-test
        if [[ -e $saved || -L $saved ]]; then mv -f "$saved" "$link"; fi
        if [[ -e $link || -L $link ]] && ! [[ $link -ef $1 ]]; then
            mv -f "$link" "$saved"
            restore+=("mv -f '$saved' '$link'")
        else
            :  # nothing was there: the link stays, as before
        fi
        ln -sfn "$1" "$link"
    }
    link_for_suite "$PWD/.build/debug/containerfs" /usr/local/bin/containerfs
    link_for_suite "$PWD/scripts/mount.containerfs" /usr/local/bin/mount.containerfs
    link_for_suite /usr/local/bin/mount.containerfs /sbin/mount.containerfs
    trap 'for r in "${restore[@]}"; do eval "$r"; done' EXIT
fi
status=0 failures=()
swift test 2>&1 | tail -n 40 || { rc=${PIPESTATUS[0]}; status=1; failures+=("unit tests (swift test exited $rc)"); }
if [[ -x scripts/bench.sh ]]; then
    bash scripts/bench.sh --smoke || { status=1; failures+=("the benchmark smoke run"); }
fi
CONTAINERFS=$PWD/.build/debug/containerfs bash Tests/integration/run.sh || status=1
# Whatever failed before the mounted suite is said again at the very end, where a reader
# of the log looks: its own output may be hundreds of lines up.
((${#failures[@]} == 0)) || printf 'FAILED before the mounted suite: %s\n' "${failures[@]}" >&2
exit $status
