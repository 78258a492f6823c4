#!/usr/bin/env bash
# The whole test suite: dependencies, build, core unit tests (no mount), the mounted
# shell suite (real FUSE mounts), and a smoke run of the benchmark (no timing asserted).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
swift build
swift test 2>&1 | tail -n 40
status=0
CONTAINERFS=$PWD/.build/debug/containerfs bash Tests/integration/run.sh || status=$?
if [[ -x scripts/bench.sh ]]; then
    bash scripts/bench.sh --smoke || status=1
fi
exit $status
