#!/usr/bin/env bash
# rss-exec.sh LABEL DIR CMD [ARGS...]
#
# Runs CMD in place of this script (exec: same PID, so fsbench.sh still accounts the
# daemon's CPU time and reaps it) after starting a sampler that appends
#
#     EPOCH_SECONDS VmRSS_kB VmHWM_kB THREADS RssAnon_kB
#
# every ${BENCH_RSS_INTERVAL:-0.5} s to DIR/LABEL.PID.rss for as long as the process lives.
# VmHWM is the kernel's own peak-RSS counter, so the last line holds the daemon's peak
# over its whole life (the sampler only misses the last <0.5 s of teardown). RssAnon is the
# daemon's own memory (heap, stacks, buffers); the rest of VmRSS is mapped files, mostly
# shared libraries (for ContainerFS the Swift runtime and Foundation, ~20 MiB), which every
# process mapping them shares.
set -u
label=$1 dir=$2
shift 2
pid=$$
interval=${BENCH_RSS_INTERVAL:-0.5}
mkdir -p "$dir"
out=$dir/$label.$pid.rss
(
	cd / || exit 0
	exec </dev/null >/dev/null 2>&1
	self=$(readlink /proc/$BASHPID/exe)
	# wait for the exec below (until then /proc/$pid is this shell; mid-exec the link
	# can be unreadable)
	for _ in $(seq 1 500); do
		[[ -e /proc/$pid ]] || exit 0
		exe=$(readlink /proc/$pid/exe 2>/dev/null)
		[[ -n $exe && $exe != "$self" ]] && break
		sleep 0.02
	done
	while [[ -e /proc/$pid ]]; do
		st="" rss="" hwm="" thr="" anon=""
		while read -r k v _; do
			case $k in
				State:) st=$v ;;
				VmRSS:) rss=$v ;;
				VmHWM:) hwm=$v ;;
				Threads:) thr=$v ;;
				RssAnon:) anon=$v ;;
			esac
		done <"/proc/$pid/status" 2>/dev/null
		[[ $st == Z || $st == X ]] && break
		# a status read mid-exec can lack fields: such a sample is skipped (a line short of
		# one shifts every column after it)
		[[ -n $hwm && -n $rss && -n $thr ]] && printf '%s %s %s %s %s\n' "$EPOCHREALTIME" "$rss" "$hwm" "$thr" "$anon" >>"$out"
		sleep "$interval"
	done
) &
exec "$@"
