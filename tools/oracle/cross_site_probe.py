#!/usr/bin/env python3
"""Attacks `sessiondb serve` from web pages in headless Chromium (Debian's, driven by
Playwright; no browser is downloaded), as a page the user happens to visit would:

  attempted      a page of another site (http://evil.example:PORT/, which the browser resolves
                 to this machine, served here) sends every write a page can send without a
                 preflight to SERVER's conversation CHAT: fetch `text/plain` and `no-cors`,
                 `navigator.sendBeacon`, HTML forms (`text/plain` and urlencoded), a body-less
                 fork, and a JSON fetch (which needs a preflight); all were sent
  cross-read     that page cannot read the listing (no CORS answer for it)
  rebound-read   a page whose own name was rebound to the server's address (DNS rebinding:
                 http://rebind.evil.example:SERVER_PORT/) reads nothing: 403 for the listing
  rebound-write  and its same-origin JSON write is refused (403)

Whether anything was written is for the caller to check, on disk. Prints one line per check
and a JSON summary last; exits 1 when a check failed.

Usage: cross_site_probe.py SERVER_URL CHAT
"""
import http.server
import json
import os
import socket
import sys
import threading
import urllib.parse

from playwright.sync_api import sync_playwright

SERVER, CHAT = sys.argv[1:3]
SERVER_PORT = urllib.parse.urlparse(SERVER).port
results: dict[str, str] = {}


def check(name: str, ok: bool, detail: str) -> None:
    results[name] = "ok" if ok else f"FAILED: {detail}"
    print(f"{'ok    ' if ok else 'FAILED'} {name}: {detail}")


def attack_page() -> str:
    target = f"{SERVER}/api/v2/conversations/{CHAT}"
    injected = json.dumps({"role": "system", "content": "Injected by another site."})
    return f"""<!doctype html>
<html><body>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe><iframe name="sink3"></iframe>
<form id="plain" method="POST" enctype="text/plain" target="sink1" action="{target}">
  <input name='{{"role": "system", "content": "form", "pad": "' value='"}}'>
</form>
<form id="urlencoded" method="POST" target="sink2" action="{target}">
  <input name="role" value="system"><input name="content" value="form">
</form>
<form id="fork" method="POST" target="sink3" action="{target}/fork?after_message=0"></form>
<script>
window.attack = async () => {{
  const target = {json.dumps(target)};
  const body = {json.dumps(injected)};
  const out = {{}};
  const tries = {{
    "fetch text/plain": () => fetch(target, {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}}, body}}),
    "fetch no type": () => fetch(target, {{method: "POST", mode: "no-cors", body}}),
    "fetch fork": () => fetch(target + "/fork?after_message=0", {{method: "POST", mode: "no-cors"}}),
    "fetch json": () => fetch(target, {{method: "POST", headers: {{"Content-Type": "application/json"}}, body}}),
    "fetch delete": () => fetch(target, {{method: "DELETE", headers: {{"Content-Type": "application/json"}}}}),
    "beacon": async () => navigator.sendBeacon(target, new Blob([body], {{type: "text/plain"}})),
  }};
  for (const [name, send] of Object.entries(tries)) {{
    try {{ const r = await send(); out[name] = "sent (" + (r && r.type ? r.type : String(r)) + ")"; }}
    catch (e) {{ out[name] = "refused by the browser: " + e; }}
  }}
  for (const id of ["plain", "urlencoded", "fork"]) {{ document.getElementById(id).submit(); out["form " + id] = "submitted"; }}
  try {{ const r = await fetch({json.dumps(SERVER + "/api/v2/conversations")}); out["read"] = "READ " + (await r.text()).slice(0, 200); }}
  catch (e) {{ out["read"] = "refused by the browser: " + e; }}
  return out;
}};
</script>
</body></html>"""


class Evil(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        page = attack_page().encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *args) -> None:
        pass


def main() -> int:
    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Evil)
    evil_port = evil.server_address[1]
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=os.environ.get("SESSIONDB_CHROMIUM", "/usr/bin/chromium"),
            headless=True,
            args=["--host-resolver-rules=MAP evil.example 127.0.0.1, MAP rebind.evil.example 127.0.0.1", "--disable-background-networking"],
        )
        try:
            page = browser.new_page()
            page.goto(f"http://evil.example:{evil_port}/")
            tried = page.evaluate("window.attack()")
            page.wait_for_timeout(1500)  # the forms' navigations
            check("attempted", len(tried) == 10, json.dumps(tried))
            read = tried.get("read", "")
            check("cross-read", not read.startswith("READ"), read)
            # DNS rebinding: the page's own name now points at the server.
            rebound = browser.new_page()
            first = rebound.goto(f"http://rebind.evil.example:{SERVER_PORT}/")
            got = rebound.evaluate(
                """async () => {
                    const r = await fetch('/api/v2/conversations');
                    return [r.status, (await r.text()).slice(0, 300)];
                }"""
            )
            check("rebound-read", first.status == 403 and got[0] == 403 and CHAT not in got[1], f"the page: {first.status}; its read: {got}")
            wrote = rebound.evaluate(
                """async ([chat, body]) => {
                    const r = await fetch('/api/v2/conversations/' + chat, {method: 'POST', headers: {'Content-Type': 'application/json'}, body});
                    return [r.status, (await r.text()).slice(0, 300)];
                }""",
                [CHAT, json.dumps({"role": "system", "content": "Injected after rebinding."})],
            )
            check("rebound-write", wrote[0] == 403, f"{wrote}")
        finally:
            browser.close()
            evil.shutdown()
    print(json.dumps(results))
    return 0 if all(v == "ok" for v in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
