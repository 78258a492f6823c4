# The store watcher that could not watch every directory (here: more directories than its
# budget, a quarter of the descriptor limit and at least 1,024) makes the mount use short
# cache timeouts and no kept pages; once the directories are gone again it watches every
# directory and the mount keeps pages again (DESIGN.md 28; found by stress-ng's `dir`
# stressor, after which the mount stayed slow until remounted). Kept pages are seen with
# fincore(1), whose own open drops a file's pages unless the open keeps them: after a
# `cat`, 1 page while complete, 0 while incomplete. The build before stays at 0 after the
# directories are removed.
. "$(dirname "$0")/../lib/common.sh"
# The inotify watch budget: the fanotify watcher (DESIGN.md 59) has none (one mark).
[[ ${CFS_MOUNT_OPTIONS:-} == *watcher=fanotify* ]] && _skip "no watch budget under -o watcher=fanotify"
_require_cmd prlimit fincore
fs_mount
C=$(_mkcontainer com.example.budget)
# A budget of 1,024 watched directories (the watcher asks for the limit as it goes).
_assert_ok prlimit --pid "$(_daemon_pid)" --nofile=4096:4096
D=$C/Documents
SD=$TEST_STORE/containers/com.example.budget/Documents
LOG=$TEST_TMP/daemon.$_CFS_N.log
watch_budget() { # the budget the daemon has: a quarter of its soft limit, at least 1,024
    local soft
    soft=$(awk '/^Max open files/ { print $4 }' "/proc/$(_daemon_pid)/limits")
    echo $(( soft / 4 > 1024 ? soft / 4 : 1024 ))
}
pages() { cat "$D/f" >/dev/null; fincore --noheadings --output PAGES "$D/f" | tr -d ' '; }
wait_log() { # TEXT: up to 10 s for the daemon to log it
    local i
    for i in $(seq 100); do grep -q "$1" "$LOG" && return 0; sleep 0.1; done
    echo "daemon never logged '$1'"; cat "$LOG"; return 1
}

echo "kept" >"$D/f"
_assert_output "1" pages

n=$(( $(watch_budget) + 100 ))
mkdir "$SD/many"
(cd "$SD/many" && seq -f "d%g" 1 "$n" | xargs mkdir)
_assert_ok wait_log "more than $(watch_budget) directories in the store; using short cache timeouts"
_assert_output "0" pages

rm -rf "$SD/many"
_assert_ok wait_log "every directory of the store is watched again"
_assert_output "1" pages
# And still coherent: an edit made in the store is read at once.
echo "changed in the store" >"$SD/f"
_assert_output "changed in the store" cat "$D/f"
