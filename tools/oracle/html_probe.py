#!/usr/bin/env python3
"""Opens an exported HTML page in headless Chromium (Debian's, driven by Playwright; no browser
is ever downloaded) and reports, as one JSON object on stdout, everything the page did:

  requests   every request the page made, other than for the page itself and its embedded
             (data:) images
  bindings   calls to window.pwned(...), a function that hostile payloads call if they run
  dialogs    alert/confirm/prompt dialogs opened
  console    console messages (CSP reports land here)
  title      document.title after the page settled (payloads also try to change it)
  text       the page's visible text (document.body.innerText)
  styles     computed styles that show the page's inline styles applied under its CSP
  images     embedded images: how many there are and how many decoded

Usage: tools/oracle/html_probe.py PAGE.html   (SESSIONDB_CHROMIUM overrides /usr/bin/chromium)
"""
import json
import os
import pathlib
import sys

from playwright.sync_api import sync_playwright

STYLES = """() => {
  const msg = document.querySelector('.msg');
  const span = document.querySelector('.code pre span[style]');
  return {
    msg_border_style: msg ? getComputedStyle(msg).borderTopStyle : null,
    msg_border_radius: msg ? getComputedStyle(msg).borderTopLeftRadius : null,
    body_max_width: getComputedStyle(document.body).maxWidth,
    code_span_color: span ? getComputedStyle(span).color : null,
    code_span_inline_color: span ? span.style.color : null,
  };
}"""

IMAGES = """() => {
  const imgs = [...document.images];
  return {count: imgs.length, decoded: imgs.filter(i => i.complete && i.naturalWidth > 0).length,
          sources: imgs.map(i => i.getAttribute('src').slice(0, 40))};
}"""


def main() -> None:
    page_path = pathlib.Path(sys.argv[1]).resolve()
    page_url = page_path.as_uri()
    chromium = os.environ.get("SESSIONDB_CHROMIUM", "/usr/bin/chromium")
    report = {"requests": [], "bindings": [], "dialogs": [], "console": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True)
        try:
            page = browser.new_page()
            page.expose_binding("pwned", lambda _source, *args: report["bindings"].append([str(a) for a in args]))

            def on_request(request):
                if request.url != page_url and not request.url.startswith("data:"):
                    report["requests"].append(request.url)

            def on_dialog(dialog):
                report["dialogs"].append(f"{dialog.type}: {dialog.message}")
                dialog.dismiss()

            page.on("request", on_request)
            page.on("dialog", on_dialog)
            page.on("console", lambda m: report["console"].append(f"{m.type}: {m.text}"))
            page.goto(page_url, wait_until="load")
            # Time for timers, event handlers and late loads to fire, had anything been allowed.
            page.wait_for_timeout(1000)
            report["title"] = page.title()
            report["text"] = page.evaluate("() => document.body.innerText")
            report["styles"] = page.evaluate(STYLES)
            report["images"] = page.evaluate(IMAGES)
        finally:
            browser.close()
    json.dump(report, sys.stdout, ensure_ascii=False, indent=1)
    print()


if __name__ == "__main__":
    main()
