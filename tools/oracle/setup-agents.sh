#!/usr/bin/env bash
# Installs the coding agents that tests/mcp_agents.rs drives against `sessiondb mcp`: Claude Code
# and Codex, at the versions tools/agents/package.json pins (package-lock.json holds their
# checksums), from the npm registry into tools/agents/node_modules (ignored by git), unless they
# are there already. Installs Debian's nodejs and npm first when npm is missing (apt-get, so run
# as root). Each package carries its native binary for this platform (an optional dependency
# npm chooses), so nothing is downloaded when the agents run; the test runs them offline.
# Prints the directory holding `claude` and `codex`. Usage: tools/oracle/setup-agents.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=tools/agents
bin="$dir/node_modules/.bin"
if ! command -v npm >/dev/null 2>&1; then
    apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm >&2
fi
pinned() {
    node -p "require('./$dir/package.json').dependencies['$1']"
}
installed() {
    "$bin/claude" --version 2>/dev/null | grep -qx "$(pinned @anthropic-ai/claude-code) (Claude Code)" &&
        "$bin/codex" --version 2>/dev/null | grep -qx "codex-cli $(pinned @openai/codex)"
}
if ! installed; then
    npm ci --prefix "$dir" --no-audit --no-fund >&2
    # Claude Code's postinstall puts the native binary in place of bin/claude.exe; an npm that
    # holds back install scripts leaves the placeholder, so it is run here.
    if ! "$bin/claude" --version >/dev/null 2>&1; then
        (cd "$dir/node_modules/@anthropic-ai/claude-code" && node install.cjs) >&2
    fi
    if ! installed; then
        echo "setup-agents.sh: claude or codex does not run at the pinned version after npm ci" >&2
        exit 1
    fi
fi
echo "$PWD/$bin"
