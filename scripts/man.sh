#!/usr/bin/env bash
# scripts/man.sh - writes the manual page containerfs(8) to OUTPUT (default
# .build/man/containerfs.8): swift-argument-parser's generate-manual plugin renders every
# subcommand's help text (the same text --help prints), and scripts/man/sections.mdoc adds
# the sections help texts do not carry (mounting, fstab, systemd, exit status, signals,
# files, examples). Works offline (the plugin comes with the package's dependencies).
#
# usage: scripts/man.sh [OUTPUT] ; CONFIGURATION=release|debug (default debug)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.build/man/containerfs.8}
swift package --allow-writing-to-package-directory generate-manual \
    --configuration "${CONFIGURATION:-debug}" --section 8 --date "$(date -u +%Y-%m-%d)" >/dev/null
generated=.build/plugins/GenerateManual/outputs/containerfs/containerfs.8
[[ -s $generated ]] || { echo "man.sh: the plugin wrote no $generated" >&2; exit 1; }
mkdir -p "$(dirname "$OUT")"
# the plugin's own EXIT STATUS (.Ex -std, "0 on success, >0 if an error occurs") gives way
# to the project's: 1 failed, 2 usage error
{ sed '/^\.Sh "EXIT STATUS"/,$d' "$generated"; echo; cat scripts/man/sections.mdoc; } >"$OUT"
echo "$OUT"
