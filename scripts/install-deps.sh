#!/usr/bin/env bash
# Installs what building, mounting and testing ContainerFS need on Debian (bookworm).
# The Swift toolchain itself is expected on PATH. Idempotent; quiet when all is there.
set -euo pipefail
packages=(libfuse3-dev fuse3 libsqlite3-dev sqlite3 libarchive-dev pkg-config python3 attr acl util-linux
          trash-cli fio jq linux-perf psmisc procps xfsprogs bsdextrautils strace bubblewrap)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Mounts by users other than root need /dev/fuse and fusermount3 (fuse3 ships both).
[[ -c /dev/fuse ]] || { echo "install-deps: /dev/fuse is missing: FUSE is not available here" >&2; exit 1; }
