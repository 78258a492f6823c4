#!/usr/bin/env bash
# scripts/install.sh - installs a built containerfs: the binary and its mount(8) helper in
# PREFIX/bin (default /usr/local), with a link to the helper in /sbin, where mount(8) looks
# for mount.TYPE helpers (`mount -t containerfs`, fstab lines of type containerfs).
#
# usage: scripts/install.sh [BINARY]      (default .build/release/containerfs)
# Environment: PREFIX (default /usr/local). Run as root (or through sudo).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-.build/release/containerfs}
PREFIX=${PREFIX:-/usr/local}
[[ -x $BIN ]] || { echo "install.sh: $BIN: not built (swift build -c release)" >&2; exit 1; }
install -d "$PREFIX/bin"
install -m 0755 "$BIN" "$PREFIX/bin/containerfs"
install -m 0755 scripts/mount.containerfs "$PREFIX/bin/mount.containerfs"
ln -sfn "$PREFIX/bin/mount.containerfs" /sbin/mount.containerfs
echo "installed $PREFIX/bin/containerfs, $PREFIX/bin/mount.containerfs (linked from /sbin)"
