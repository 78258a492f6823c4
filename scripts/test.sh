#!/usr/bin/env bash
# The whole test suite: dependencies, build, core unit tests (no mount), a smoke run of the
# benchmark (no timing asserted), and last the mounted shell suite (real FUSE mounts), whose
# closing line `N passed, N failed, N skipped` is the run's verdict.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
swift build
# mount(8) runs FUSE helpers with a fixed PATH (/usr/local/bin among it): the mount -t and
# fstab cases need this build there. A binary installed there before (scripts/demo.sh
# installs one) is put aside for the suite and back after it; one an interrupted run left
# aside is put back first.
if [[ $(id -u) -eq 0 ]]; then
    installed=/usr/local/bin/containerfs saved=/usr/local/bin/.containerfs.before-test
    if [[ -e $saved || -L $saved ]]; then mv -f "$saved" "$installed"; fi
    if [[ -e $installed || -L $installed ]] && ! [[ $installed -ef .build/debug/containerfs ]]; then
        mv -f "$installed" "$saved"
        trap 'mv -f "$saved" "$installed"' EXIT
    fi
    ln -sf "$PWD/.build/debug/containerfs" "$installed"
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
