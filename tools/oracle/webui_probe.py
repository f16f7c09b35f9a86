#!/usr/bin/env python3
"""Drives gptme's stock web UI, served by `sessiondb serve`, in headless Chromium (Debian's,
driven by Playwright; no browser is downloaded) and checks what a person would see:

  sidebar     every conversation the API lists is named in the sidebar
  open        opening CHAT shows its messages (each message's text from the API is on the page)
  history     the History page counts as many conversations as the API lists
  history-search  the History page's search box, typing WORD: it lists SEARCH_CHAT alone
  search      Ctrl-K, typing WORD: SEARCH_CHAT is offered, and choosing it opens it (WORD is
              only in a message body of it, not in its name, id or preview, and its letters need
              not occur in them in order; the API's `q=` finds it through the index)
  live        a message appended to CHAT by real gptme in another process
              (tools/oracle/gptme_appender.py) appears on the open page without a reload
  errors      no request the UI made was answered 4xx/5xx

Prints one line per check and a JSON summary last; exits 1 when a check failed. Screenshots go
to $SESSIONDB_SCREENSHOTS when set (never into the repository).

With TOKEN the server wants one: the UI is given it as gptme's own links give it
(`#baseUrl=…&userToken=…`), and then authenticates its calls with it and its event stream with
the cookie it asks for.

Usage: webui_probe.py URL LOGS_ROOT CHAT WORD SEARCH_CHAT [TOKEN]
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request

from playwright.sync_api import sync_playwright

URL, LOGS, CHAT, WORD, SEARCH_CHAT = sys.argv[1:6]
TOKEN = sys.argv[6] if len(sys.argv) > 6 else None
HERE = pathlib.Path(__file__).resolve().parent
results: dict[str, str] = {}


def api(path: str):
    headers = {"Authorization": f"Bearer {TOKEN}"} if TOKEN else {}
    with urllib.request.urlopen(urllib.request.Request(URL.rstrip("/") + path, headers=headers)) as r:
        return json.load(r)


def check(name: str, ok: bool, detail: str) -> None:
    results[name] = "ok" if ok else f"FAILED: {detail}"
    print(f"{'ok    ' if ok else 'FAILED'} {name}: {detail}")


def words(s: str) -> str:
    return " ".join(s.split())


def shot(page, name: str) -> None:
    d = os.environ.get("SESSIONDB_SCREENSHOTS")
    if d:
        page.screenshot(path=str(pathlib.Path(d) / f"{name}.png"))


def main() -> int:
    listing = api("/api/v2/conversations?limit=1000")
    chat = api(f"/api/v2/conversations/{CHAT}")
    found = api(f"/api/v2/conversations?q={WORD}&limit=1000")
    target = next((c for c in listing if c["id"] == SEARCH_CHAT), None)
    global OPENED_TEXT
    # A reply in SEARCH_CHAT (neither its preview nor the matched message the search shows).
    OPENED_TEXT = words(api(f"/api/v2/conversations/{SEARCH_CHAT}")["log"][1]["content"])
    body_only = target is not None and all(WORD.lower() not in (target[k] or "").lower() for k in ("id", "name", "last_message_preview"))
    check("search-word", body_only and any(c["id"] == SEARCH_CHAT for c in found),
          f"{WORD!r} is in no name, id or preview of {SEARCH_CHAT}; the API's q= lists it: {[c['id'] for c in found]}")
    bad: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=os.environ.get("SESSIONDB_CHROMIUM", "/usr/bin/chromium"), headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("response", lambda r: bad.append(f"{r.status} {r.request.method} {r.url}") if r.status >= 400 else None)
            base = URL.rstrip("/")
            page.goto(f"{base}/#baseUrl={urllib.parse.quote(base)}&userToken={TOKEN}" if TOKEN else URL)
            skip = page.get_by_role("button", name="Skip for now")
            try:
                skip.click(timeout=10000)
            except Exception:
                pass  # no welcome dialog
            # Sidebar.
            page.get_by_text(listing[-1]["name"].split()[0]).first.wait_for(timeout=20000)
            sidebar = words(page.inner_text("body"))
            missing = [c["name"] for c in listing if words(c["name"]) not in sidebar]
            check("sidebar", not missing, f"{len(listing) - len(missing)} of {len(listing)} conversations named in the sidebar" + (f"; missing {missing}" if missing else ""))
            shot(page, "sidebar")
            # Open one.
            page.get_by_text(CHAT, exact=True).first.click()
            texts = [words(m["content"]) for m in chat["log"] if m["role"] in ("user", "assistant") and not m.get("hide") and "```" not in m["content"]]
            # The first message: the last one may be the sidebar's preview too.
            page.get_by_text(texts[0]).first.wait_for(timeout=20000)
            page.get_by_text(texts[-2]).first.wait_for(timeout=20000)
            shown = words(page.inner_text("body"))
            absent = [t for t in texts if t not in shown]
            check("open", not absent, f"{len(texts) - len(absent)} of {len(texts)} plain messages of {CHAT} shown" + (f"; absent {absent}" if absent else ""))
            shot(page, "conversation")
            # Live: real gptme appends in another process; the page shows it without a reload.
            acks = tempfile.mktemp()
            subprocess.run([sys.executable, str(HERE / "gptme_appender.py"), LOGS, acks, "1", CHAT], check=True)
            appended = f"ack {CHAT} 0"
            try:
                page.get_by_text(appended).first.wait_for(timeout=30000)
                check("live", True, f"{appended!r}, appended by gptme in another process, appeared without a reload")
            except Exception as e:
                check("live", False, f"{appended!r} did not appear: {e}")
            shot(page, "live")
            # History.
            page.get_by_text("History", exact=True).first.click()
            expected = len(api("/api/v2/conversations?limit=1000"))
            counter = page.get_by_text(f"{expected} conversations", exact=False).first
            try:
                counter.wait_for(timeout=20000)
                check("history", True, f"History counts {expected} conversations, as the API lists")
            except Exception:
                check("history", False, f"History does not say {expected} conversations: {words(page.inner_text('body'))[:300]}")
            shot(page, "history")
            # The History page's search box asks the server (`q=`) and shows its answer.
            shown_as = SEARCH_CHAT[11:] if SEARCH_CHAT[:4].isdigit() else SEARCH_CHAT
            page.get_by_placeholder("Search conversations...", exact=True).fill(WORD)
            try:
                page.get_by_text("1 conversation", exact=True).first.wait_for(timeout=20000)
                page.get_by_text(shown_as).first.wait_for(timeout=20000)
                check("history-search", True, f"History's search {WORD!r} lists {SEARCH_CHAT} alone")
            except Exception:
                check("history-search", False, f"History's search {WORD!r} does not list {SEARCH_CHAT} alone: {words(page.inner_text('body'))[:300]}")
            shot(page, "history-search")
            # Ctrl-K: the conversation is offered, and choosing it opens it.
            page.keyboard.press("Control+k")
            page.get_by_placeholder("Type a command or search conversations...").fill(WORD)
            option = page.get_by_role("option").filter(has_text=shown_as)
            try:
                option.first.wait_for(timeout=20000)
                offered = words(option.first.inner_text())
                option.first.click()
                page.get_by_text(OPENED_TEXT).first.wait_for(timeout=20000)
                if SEARCH_CHAT not in urllib.parse.unquote(page.url):
                    raise RuntimeError(f"the page is {page.url}")
                check("search", True, f"Ctrl-K {WORD!r} offers {SEARCH_CHAT} ({offered!r}), and choosing it opens it")
            except Exception as e:
                check("search", False, f"Ctrl-K {WORD!r} does not offer and open {SEARCH_CHAT}: {e}: {words(page.inner_text('body'))[:300]}")
            shot(page, "search")
        finally:
            browser.close()
    check("errors", not bad, "no request answered 4xx/5xx" if not bad else f"{bad}")
    print(json.dumps(results))
    return 0 if all(v == "ok" for v in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
