#!/usr/bin/env python3
"""Opens one conversation in gptme's stock web UI, served by `sessiondb serve`, in headless
Chromium (Debian's, driven by Playwright; no browser is downloaded), waits until TEXT is shown,
and prints what a person would have on screen, for the test to judge: one JSON document
{"text": the page's visible text, "html": the page's HTML, "requests": every URL the UI asked
for, "bad": those answered 4xx/5xx}.

The UI is given TOKEN as gptme's own links give it (`#baseUrl=…&userToken=…`).

Usage: page_probe.py URL CHAT TEXT TOKEN
"""
import json
import os
import sys
import urllib.parse

from playwright.sync_api import sync_playwright

URL, CHAT, TEXT, TOKEN = sys.argv[1:5]


def main() -> int:
    requests: list[str] = []
    bad: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=os.environ.get("SESSIONDB_CHROMIUM", "/usr/bin/chromium"), headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("request", lambda r: requests.append(r.url))
            page.on("response", lambda r: bad.append(f"{r.status} {r.request.method} {r.url}") if r.status >= 400 else None)
            base = URL.rstrip("/")
            page.goto(f"{base}/#baseUrl={urllib.parse.quote(base)}&userToken={TOKEN}")
            try:
                page.get_by_role("button", name="Skip for now").click(timeout=10000)
            except Exception:
                pass  # no welcome dialog
            page.get_by_text(CHAT, exact=True).first.click(timeout=20000)
            page.get_by_text(TEXT).first.wait_for(timeout=20000)
            # Whatever the page loads on opening (attachments' previews) has loaded.
            page.wait_for_load_state("networkidle", timeout=20000)
            out = {"text": page.inner_text("body"), "html": page.content(), "requests": requests, "bad": bad}
        finally:
            browser.close()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
