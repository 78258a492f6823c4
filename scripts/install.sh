#!/usr/bin/env bash
# scripts/install.sh - installs a built containerfs: the binary and its mount(8) helper in
# PREFIX/bin (default /usr/local), a link to the helper in SBINDIR (default /sbin: mount(8)
# looks for mount.TYPE helpers there only), the manual page containerfs(8) (scripts/man.sh)
# and completions for bash, zsh and fish (`containerfs --generate-completion-script`).
#
# usage: scripts/install.sh [BINARY]      (default .build/release/containerfs)
# Environment: PREFIX (/usr/local), SBINDIR (/sbin), CONFIGURATION (release: the build the
# manual page's help texts are read from). Run as root (or through sudo).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-.build/release/containerfs}
PREFIX=${PREFIX:-/usr/local}
SBINDIR=${SBINDIR:-/sbin}
[[ -x $BIN ]] || { echo "install.sh: $BIN: not built (swift build -c release)" >&2; exit 1; }
install -d "$PREFIX/bin" "$PREFIX/share/man/man8" "$PREFIX/share/bash-completion/completions" \
    "$PREFIX/share/zsh/site-functions" "$PREFIX/share/fish/vendor_completions.d" "$SBINDIR"
install -m 0755 "$BIN" "$PREFIX/bin/containerfs"
install -m 0755 scripts/mount.containerfs "$PREFIX/bin/mount.containerfs"
ln -sfn "$PREFIX/bin/mount.containerfs" "$SBINDIR/mount.containerfs"
CONFIGURATION=${CONFIGURATION:-release} bash scripts/man.sh .build/man/containerfs.8 >/dev/null
install -m 0644 .build/man/containerfs.8 "$PREFIX/share/man/man8/containerfs.8"
"$BIN" --generate-completion-script bash >"$PREFIX/share/bash-completion/completions/containerfs"
"$BIN" --generate-completion-script zsh >"$PREFIX/share/zsh/site-functions/_containerfs"
"$BIN" --generate-completion-script fish >"$PREFIX/share/fish/vendor_completions.d/containerfs.fish"
echo "installed into $PREFIX: bin/containerfs, bin/mount.containerfs (linked from $SBINDIR), share/man/man8/containerfs.8, bash, zsh and fish completions"
