# `containerfs watch PATH --json` is a presenter that prints one JSON object per line: the
# before-access requests it is sent and the events after each change, in commit order:
# for changes through the mount (never marked uncoordinated), for changes made directly in
# the backing store (marked uncoordinated), for a path that does not exist yet once an item
# is created there, and for containers made through the mount and by the CLI (docs/SEMANTICS.md §2, §3;
# docs/CONTROL-PROTOCOL.md; docs/SEMANTICS.md §3.6, §3.7).
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/coordination.sh"
fs_mount
C=$(_mkcontainer com.example.watch)
D=$C/Documents
SD=$TEST_STORE/containers/com.example.watch/Documents
echo one >"$D/f"

_watch dir "$D"
_watch file "$D/f"
_watch later "$D/later"
EV='^(did|subitem|resync)'      # events only, requests left out

# MARK: changes through the mount
echo a >"$D/g"
echo b >>"$D/g"
mv "$D/g" "$D/h"
rm "$D/h"
DIR=$'subitemDidAppear g\nsubitemDidChange g\nsubitemDidChange g\nsubitemDidMove g -> h\nsubitemDidDelete h'
_expect_events dir "$DIR" "$D"

echo more >>"$D/f"
_expect_events file $'request save,relinquishToWriter f\ndidChange f' "$D"
mv "$D/f" "$D/f2"
FILE=$'didChange f\ndidMove f -> f2'
_expect_events file "$FILE" "$D" "$EV"
echo again >>"$D/f2"          # the presenter follows its item
FILE+=$'\ndidChange f2'
_expect_events file "$FILE" "$D" "$EV"
mv "$D/f2" "$D/f"
FILE+=$'\ndidMove f2 -> f'
_expect_events file "$FILE" "$D" "$EV"
# Before each access a request: save first for the appends (writes for merging), not for
# the renames (the paths they name are checked at the end).
_assert_output $'request save,relinquishToWriter\nrequest relinquishToWriter\nrequest save,relinquishToWriter\nrequest relinquishToWriter' \
    eval "_events file | grep '^request' | cut -d' ' -f1-2"
DIR+=$'\nsubitemDidChange f\nsubitemDidMove f -> f2\nsubitemDidChange f2\nsubitemDidMove f2 -> f'
_expect_events dir "$DIR" "$D"

# MARK: a path that does not exist yet: bound once an item is created there
# expect_folded NAME EXPECTED: like _expect_events with events only, repeats folded (one
# create with a write may be reported as one didChange or two).
expect_folded() {
    local name=$1 want=$2
    folded() { _events "$name" "$D" | grep -E "$EV" | uniq; }
    _wait_for 10 eval '[[ $(folded) == "$want" ]]' || _fail "watch $name: expected"$'\n'"$want"$'\n'"--- got ---"$'\n'"$(folded)"
    _ok "watch $name: ${want//$'\n'/; }"
}
expect_folded later ""
echo n >"$D/later"
echo m >>"$D/later"
rm "$D/later"
expect_folded later $'didChange later\ndidDelete later'
DIR+=$'\nsubitemDidAppear later\nsubitemDidChange later\nsubitemDidChange later\nsubitemDidDelete later'
_expect_events dir "$DIR" "$D"
# ... and again when an item is created there once more
echo back >"$D/later"
expect_folded later $'didChange later\ndidDelete later\ndidChange later'
DIR+=$'\nsubitemDidAppear later\nsubitemDidChange later'
_expect_events dir "$DIR" "$D"

# MARK: changes made directly in the store arrive marked uncoordinated
# (they also come after every event above: nothing done through the mount came back
# from the store's watch as uncoordinated)
echo direct >"$SD/f"
DIR+=$'\nsubitemDidChange f (uncoordinated)'
FILE+=$'\ndidChange f (uncoordinated)'
_expect_events dir "$DIR" "$D"
_expect_events file "$FILE" "$D" "$EV"
mkdir "$SD/newdir"
echo staged >"$TEST_TMP/staged"
mv "$TEST_TMP/staged" "$SD/staged"        # one rename into the store: the item appears
DIR+=$'\nsubitemDidAppear newdir (uncoordinated)\nsubitemDidAppear staged (uncoordinated)'
_expect_events dir "$DIR" "$D"
rmdir "$SD/newdir"
rm "$SD/staged"
DIR+=$'\nsubitemDidDelete newdir (uncoordinated)\nsubitemDidDelete staged (uncoordinated)'
_expect_events dir "$DIR" "$D"

# MARK: the JSON lines themselves
_assert_ok "$PY" - "$TEST_TMP/watch.dir.out" "$TEST_TMP/watch.file.out" "$TEST_TMP/watch.later.out" "$TEST_MNT" <<'EOF'
import json, re, sys
mnt = sys.argv[-1] + "/"
rfc3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
kinds = {"didChange", "didMove", "didDelete", "subitemDidAppear", "subitemDidChange",
         "subitemDidMove", "subitemDidDelete", "resync"}
for name in sys.argv[1:-1]:
    for n, line in enumerate(open(name), 1):
        o = json.loads(line)
        where = "%s:%d: %s" % (name, n, line.strip())
        assert isinstance(o.get("uncoordinated"), bool), where
        assert rfc3339.match(o.get("time", "")), where
        assert o["path"].startswith(mnt), where
        if "request" in o:
            assert isinstance(o["request"], int) and o["steps"], where
            assert set(o["steps"]) <= {"save", "relinquishToReader", "relinquishToWriter", "accommodateDeletion", "accommodateSubitemDeletion"}, where
        else:
            assert o["event"] in kinds, where
            assert ("to" in o) == o["event"].endswith("Move"), where
            if "to" in o:
                assert o["to"].startswith(mnt), where
EOF

# MARK: a rename made directly in the store is a move (both halves in one watched directory)
mv "$SD/f" "$SD/f3"
DIR+=$'\nsubitemDidMove f -> f3 (uncoordinated)'
FILE+=$'\ndidMove f -> f3 (uncoordinated)'
_expect_events dir "$DIR" "$D"
_expect_events file "$FILE" "$D" "$EV"

# MARK: presenters of containers/: a container made through the mount and by the CLI
_watch containers "$TEST_MNT/containers"
_mkcontainer com.example.made >/dev/null
_assert_ok containerfs container create com.example.cli --store "$TEST_STORE"
mkdir "$TEST_STORE/containers/com.example.made/Documents/barrier"   # after both, uncoordinated
_expect_events containers $'subitemDidAppear containers/com.example.made\nsubitemDidAppear containers/com.example.cli\nsubitemDidAppear containers/com.example.made/Documents/barrier (uncoordinated)'

# MARK: a request names the item where it is now (after didMove, like every later event)
_assert_output $'request save,relinquishToWriter f\nrequest relinquishToWriter f\nrequest save,relinquishToWriter f2\nrequest relinquishToWriter f2' \
    eval "_events file '$D' | grep '^request' | head -4"
fs_umount

# MARK: a store reached through a symbolic link: changes made in it are heard too (the
# watcher's backing paths come from /proc, with no link in them; none began with the store's
# path as given, and every change made in the store went unheard)
mkdir -p "$TEST_TMP/real"
ln -s real "$TEST_TMP/link"
TEST_STORE=$TEST_TMP/link/store
fs_mount
LD=$(_mkcontainer com.example.linked)/Documents
_watch linked "$LD"
mkdir "$TEST_TMP/real/store/containers/com.example.linked/Documents/outside"
_expect_events linked 'subitemDidAppear outside (uncoordinated)' "$LD"
fs_umount
