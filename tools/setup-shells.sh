#!/usr/bin/env bash
# Installs Debian's tmux, zsh and fish when missing: tests/completion.rs sources sessiondb's
# completion in each shell, interactively under tmux. Usage: tools/setup-shells.sh
set -euo pipefail
missing=()
for program in tmux zsh fish; do
    command -v "$program" >/dev/null 2>&1 || missing+=("$program")
done
if [ "${#missing[@]}" -gt 0 ]; then
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi
