#!/usr/bin/env bash
# Installs the dependencies, builds ContainerFS (release), installs it (scripts/install.sh:
# the binary and its mount(8) helper in /usr/local/bin) and mounts a demo store with one
# container.
#   STORE (default ~/.local/share/containerfs)   MNT (default ~/ContainerFS)
set -euo pipefail
cd "$(dirname "$0")/.."
STORE=${STORE:-$HOME/.local/share/containerfs}
MNT=${MNT:-$HOME/ContainerFS}
SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO=sudo

bash scripts/install-deps.sh
swift build -c release
$SUDO bash scripts/install.sh .build/release/containerfs

mkdir -p "$MNT"
if grep -q " $MNT fuse.containerfs " /proc/mounts; then containerfs unmount "$MNT"; fi
containerfs mount "$STORE" "$MNT"
containerfs container list --store "$STORE" | grep -q '^com.example.notes' \
    || containerfs container create com.example.notes --store "$STORE" >/dev/null
echo "Hello from ContainerFS" > "$MNT/containers/com.example.notes/Documents/Welcome.txt"
echo "Mounted $STORE at $MNT:"
ls -l "$MNT/containers/com.example.notes"
echo "Unmount with: containerfs unmount $MNT"
