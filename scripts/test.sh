#!/usr/bin/env bash
# The whole test suite: dependencies, build, core unit tests (no mount), a smoke run of the
# benchmark (no timing asserted), and last the mounted shell suite (real FUSE mounts), whose
# closing line `N passed, N failed, N skipped` is the run's verdict.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
swift build
# mount(8) runs FUSE helpers with a fixed PATH (/usr/local/bin among it): the mount -t and
# fstab cases need `containerfs` there. In CI (or where none is installed) use this build.
if [[ $(id -u) -eq 0 && ( -n ${CI:-} || ! -e /usr/local/bin/containerfs ) ]]; then
    ln -sf "$PWD/.build/debug/containerfs" /usr/local/bin/containerfs
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
