#!/usr/bin/env bash
# The whole test suite: dependencies, build, core unit tests (no mount), the mounted
# shell suite (real FUSE mounts), and a smoke run of the benchmark (no timing asserted).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
swift build
# mount(8) runs FUSE helpers with a fixed PATH (/usr/local/bin among it): the mount -t and
# fstab cases need `containerfs` there. In CI (or where none is installed) use this build.
if [[ $(id -u) -eq 0 && ( -n ${CI:-} || ! -e /usr/local/bin/containerfs ) ]]; then
    ln -sf "$PWD/.build/debug/containerfs" /usr/local/bin/containerfs
fi
swift test 2>&1 | tail -n 40
status=0
CONTAINERFS=$PWD/.build/debug/containerfs bash Tests/integration/run.sh || status=$?
if [[ -x scripts/bench.sh ]]; then
    bash scripts/bench.sh --smoke || status=1
fi
exit $status
