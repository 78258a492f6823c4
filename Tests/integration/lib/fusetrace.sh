# shellcheck shell=bash
# Counting the FUSE requests a mount receives, with the kernel's own fuse:fuse_request_send
# tracepoint in a private tracefs instance (other tracing on the machine is left alone),
# filtered to one mount's connection. Counts, never times: a case asserts how many requests
# of a kind an action sends. Sourced after common.sh, after fs_mount:
#     . "$(dirname "$0")/../lib/fusetrace.sh"
#     _trace_begin "$TEST_MNT"; some action; _trace_end
#     _assert_eq 0 "$(_trace_count FUSE_READ)" "READ requests"
# Skips the case (exit 77) where the tracepoint is not available (not root, no tracefs).

_TRACING=/sys/kernel/tracing
_TRACE_INSTANCE=""

_trace_setup() {   # _trace_setup MNT: the instance, filtered to MNT's connection
    _require_root
    [[ -d $_TRACING/events ]] || mount -t tracefs nodev "$_TRACING" 2>/dev/null || true
    [[ -d $_TRACING/events/fuse ]] || _skip "no fuse tracepoints in $_TRACING"
    _TRACE_INSTANCE=$_TRACING/instances/containerfs-test-$$
    mkdir "$_TRACE_INSTANCE" || _skip "cannot make a tracefs instance"
    trap _trace_cleanup EXIT
}

_trace_cleanup() {   # then the usual clean-up, with the case's exit status
    local rc=$?
    set +e
    echo 0 >"$_TRACE_INSTANCE/events/fuse/fuse_request_send/enable" 2>/dev/null
    rmdir "$_TRACE_INSTANCE" 2>/dev/null
    (exit "$rc")
    _cfs_cleanup
}

_trace_begin() {   # _trace_begin MNT: start counting MNT's requests from zero
    [[ -n $_TRACE_INSTANCE ]] || _trace_setup "$1"
    # The connection id the tracepoint prints is the mount's device number (major 0), set
    # at every begin: a case that mounts again may get another one (a filter kept from the
    # first mount counted nothing now and then: listing-cache, 2 runs in 12).
    echo "connection == $(mountpoint -d "$1" | cut -d: -f2)" >"$_TRACE_INSTANCE/events/fuse/fuse_request_send/filter"
    echo >"$_TRACE_INSTANCE/trace"
    echo 1 >"$_TRACE_INSTANCE/events/fuse/fuse_request_send/enable"
}

_trace_end() {
    echo 0 >"$_TRACE_INSTANCE/events/fuse/fuse_request_send/enable"
}

_trace_count() {   # _trace_count FUSE_OPCODE: requests of that kind between begin and end
    grep -c "($1)" "$_TRACE_INSTANCE/trace" || true
}
