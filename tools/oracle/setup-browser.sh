#!/usr/bin/env bash
# Installs what tests/html_browser.rs needs to open the HTML export in a real browser: Debian's
# chromium (when /usr/bin/chromium is missing; apt-get, so run as root) and Playwright (pinned)
# in the venv of tools/oracle/setup-gptme.sh. Playwright drives that chromium; no browser is
# downloaded. Usage: tools/oracle/setup-browser.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PLAYWRIGHT_VERSION="${PLAYWRIGHT_VERSION:-1.65.2}"
if [ ! -x /usr/bin/chromium ]; then
    apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium >&2
fi
python="$(tools/oracle/setup-gptme.sh)"
if ! "$python" -c "import importlib.metadata as m, sys; sys.exit(m.version('playwright') != '$PLAYWRIGHT_VERSION')" 2>/dev/null; then
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 "$python" -m pip install --quiet --disable-pip-version-check "playwright==$PLAYWRIGHT_VERSION" >&2
fi
