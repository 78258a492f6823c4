# The standard directories (NAME.app, Documents, Documents/Inbox, Library, its three
# subdirectories, tmp) cannot be removed or renamed through the mount, by root or by the
# owner, even when empty: EACCES (docs/SEMANTICS.md §1). Nothing may take their place either (rename
# over them, RENAME_EXCHANGE). What is inside them stays ordinary; the container root takes
# new entries (dot-files of programs run with HOME there), but no second bundle.
. "$(dirname "$0")/../lib/common.sh"
_users
fs_mount
C=$(_mkcontainer com.example.notes)
LAYOUT=(Notes.app Documents Documents/Inbox Library "Library/Application Support" Library/Caches Library/Preferences tmp)

fixed_checks() {   # fixed_checks RUNNER...
    local r=("$@") d
    for d in "${LAYOUT[@]}"; do
        _assert_errno EACCES "${r[@]}" fsop rmdir "$C/$d"
        _assert_errno EACCES "${r[@]}" fsop rename "$C/$d" "$C/moved"
        _assert_errno EACCES "${r[@]}" fsop rename "$C/$d" "$C/spare/moved"
        _assert_errno EACCES "${r[@]}" fsop rename "$C/$d" "$C/moved" noreplace
        _assert_errno EACCES "${r[@]}" fsop rename "$C/spare" "$C/$d"
        _assert_errno EACCES "${r[@]}" fsop rename "$C/spare" "$C/$d" exchange
        _assert_errno EACCES "${r[@]}" fsop rename "$C/$d" "$C/spare" exchange
    done
    _assert_errno EACCES "${r[@]}" fsop rename "$C/Library/Caches" "$C/Library/Preferences"
    _assert_errno EACCES "${r[@]}" fsop rename "$C/tmp" "$C/Documents" exchange
    _assert_errno EACCES "${r[@]}" fsop mkdir "$C/Another.app"
    _assert_errno EACCES "${r[@]}" fsop rename "$C/spare" "$C/Another.app"
}

# MARK: as root, the directories empty
mkdir "$C/spare"
fixed_checks
_assert_errno EACCES rmdir "$C/tmp"
_assert_errno EACCES mv "$C/Library" "$C/Library2"
_assert_errno EACCES rm -rf "$C/Library/Caches"

# MARK: as the owner (the container is handed to U1 in the store)
fs_umount
chown -R "$U1_UID:$U1_GID" "$TEST_STORE/containers/com.example.notes"
fs_mount
fixed_checks _as_user "$U1"

# MARK: contents stay ordinary, the container root takes new entries
_assert_ok _as_user "$U1" sh -c "echo hist >'$C/.bash_history'"
_assert_ok _as_user "$U1" mkdir "$C/.config" "$C/tmp/work" "$C/Library/Caches/c"
_assert_ok _as_user "$U1" fsop rename "$C/tmp/work" "$C/Library/Caches/c/work"
_assert_ok _as_user "$U1" rm -r "$C/Library/Caches/c" "$C/.config" "$C/.bash_history"
_assert_ok _as_user "$U1" fsop rename "$C/spare" "$C/spare2"
_assert_ok _as_user "$U1" fsop rmdir "$C/spare2"
_assert_output $'Documents\nLibrary\nNotes.app\ntmp' fsop listdir "$C"
_assert_output $'Application Support\nCaches\nPreferences' fsop listdir "$C/Library"
