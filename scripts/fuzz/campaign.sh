#!/bin/bash
# Runs the coherence fuzzer (coherence.py) over seeds, on the default mount and on
# -o writeback, and prints one line per run; findings are in $FUZZ_DIR/logs/TAG-MODE-SEED.jsonl
# (summarize.py lists them with the burst before each). $FUZZ_OPTIONS (coherence.py) adds mount
# options to every mount: a campaign of an opt-in mode.
# usage: scripts/fuzz/campaign.sh TAG "SEEDS" STEPS   ($FUZZ_FLAGS: more options for every run;
#   $FUZZ_MODES: "def" and/or "wb", default both; passthrough takes no writeback)
set -u
here=$(cd "$(dirname "$0")" && pwd)
TAG=$1 SEEDS=$2 STEPS=$3
export FUZZ_DIR=${FUZZ_DIR:-/var/tmp/containerfs-fuzz}
mkdir -p "$FUZZ_DIR/logs"
for s in $SEEDS; do for m in ${FUZZ_MODES:-def wb}; do
    W=(); [[ $m == wb ]] && W=(--writeback)
    timeout 900 python3 "$here/coherence.py" run --seed "$s" --steps "$STEPS" "${W[@]}" ${FUZZ_FLAGS:-} \
        --log "$FUZZ_DIR/logs/$TAG-$m-$s.jsonl" >"$FUZZ_DIR/logs/$TAG-$m-$s.out" 2>&1
    tail -1 "$FUZZ_DIR/logs/$TAG-$m-$s.out"
done; done
