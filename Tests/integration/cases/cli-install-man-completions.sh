# timeout: 600
# The install step (scripts/install.sh) puts in place: the binary, mount(8)'s helper (linked
# from SBINDIR), the manual page containerfs(8) from the help texts plus the sections they do
# not carry, and completions for bash, zsh and fish. The manual page renders, with a section
# per subcommand's help and EXIT STATUS, SIGNALS, FILES, fstab use and EXAMPLES; the bash
# completion loads and completes subcommands. (zsh and fish are not installed here: README,
# "Troubleshooting", has the manual check.)
. "$(dirname "$0")/../lib/common.sh"
_require_cmd swift man
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
P=$TEST_TMP/prefix
_assert_ok env PREFIX="$P" SBINDIR="$TEST_TMP/sbin" CONFIGURATION=debug bash "$REPO/scripts/install.sh" "$CONTAINERFS"
for f in bin/containerfs bin/mount.containerfs share/man/man8/containerfs.8 share/bash-completion/completions/containerfs \
    share/zsh/site-functions/_containerfs share/fish/vendor_completions.d/containerfs.fish; do
    [[ -s $P/$f ]] || _fail "not installed: $f"
done
[[ $TEST_TMP/sbin/mount.containerfs -ef $P/bin/mount.containerfs ]] || _fail "the helper is not linked from SBINDIR"
cmp -s "$P/bin/containerfs" "$CONTAINERFS" || _fail "another binary was installed"

page=$(MANWIDTH=1000 man -l "$P/share/man/man8/containerfs.8" 2>/dev/null)
for heading in NAME SYNOPSIS DESCRIPTION MOUNTING "FSTAB AND MOUNT(8)" SYSTEMD "EXIT STATUS" SIGNALS FILES EXAMPLES "SEE ALSO"; do
    grep -qx "$heading" <<<"$page" || _fail "the manual page has no $heading section"
done
_assert_eq "CONTAINERFS(8)" "$(head -1 <<<"$page" | awk '{print $1}')" "section 8"
# every subcommand's help text is there, as --help prints it
for sub in mount unmount status container coordinate watch; do
    abstract=$(containerfs help "$sub" | sed -n '1s/^OVERVIEW: //p')
    [[ $(tr -s ' \n' '  ' <<<"$page") == *"$abstract"* ]] || _fail "the manual page lacks $sub's help: $abstract"
done
for needle in "2 usage error: an unknown option or value" "control_timeout=S" "containerfs unmount MOUNTPOINT" "STORE/control.sock"; do
    [[ $(tr -s ' \n' '  ' <<<"$page") == *"$(printf '%s' "$needle" | tr -s ' \n' '  ')"* ]] || _fail "the manual page does not say '$needle'"
done

# bash completion: subcommands, and mount's options
out=$(bash -c '. "$1"; COMP_WORDS=(containerfs st); COMP_CWORD=1; COMP_LINE="containerfs st"; COMP_POINT=${#COMP_LINE}
    $(complete -p containerfs | sed "s/.*-F \([^ ]*\) .*/\1/") containerfs st containerfs; printf "%s\n" "${COMPREPLY[@]}"' _ \
    "$P/share/bash-completion/completions/containerfs")
_assert_eq "status" "$out" "bash completes 'containerfs st'"
# the zsh and fish scripts are the parser's own, for this command
grep -q '^#compdef containerfs' "$P/share/zsh/site-functions/_containerfs" || _fail "zsh completion is not for containerfs"
grep -q "complete -c 'containerfs'\|complete -c containerfs" "$P/share/fish/vendor_completions.d/containerfs.fish" || _fail "fish completion is not for containerfs"
