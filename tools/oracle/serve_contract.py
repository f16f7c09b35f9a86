"""The contract of `sessiondb serve`: every read endpoint and parameter combination asked of
the real gptme-server and of sessiondb serve, on copies of the same logs root, and the answers
compared field by field after the logs root's path is replaced by `<ROOT>`.

Usage: serve_contract.py GPTME_URL GPTME_ROOT SESSIONDB_URL SESSIONDB_ROOT TOKEN

Prints one line per request compared and every difference; exits 1 on any difference that is
not one of the deliberate ones below, 0 otherwise.

Deliberate differences (README, "sessiondb serve"):
- `q=`/`search=` also matches message content: sessiondb's answer holds every conversation
  gptme's does, in the same order, and may hold more; the extra ones are checked to contain
  the text in a message, and their `name` to be the listing's name followed by ` · ` and the
  text around the match (which holds it);
- `…/config` of a conversation without `config.toml`: gptme-server answers 404 until the
  conversation is opened, which writes one (its own working directory as the workspace), and
  answers that from then on; sessiondb answers gptme's defaults with `<dir>/workspace` and
  writes nothing: compared with gptme's answer after the open, but for the workspace;
- a non-finite number (bare `NaN` in gptme's JSON) is `null`;
- `GET /api/v2` has a `server` field naming sessiondb;
- no ETag / 304 on reads;
- in a bare-array listing, conversations modified at the same instant come in gptme-server's
  directory-listing order (whatever the file system gives), in sessiondb's by id: such ties are
  compared as sets (the paginated listing orders ties by id in both, and is compared as is).
"""

import http.client
import json
import math
import os
import sys
import urllib.parse

GPTME_URL, GPTME_ROOT, OURS_URL, OURS_ROOT, TOKEN = sys.argv[1:6]
FLOAT_TOLERANCE = 1e-6
problems: list[str] = []
gptme_failed: list[str] = []
compared = 0


def fetch(base: str, path: str) -> tuple[int, bytes, str]:
    u = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    # The path is sent as given: no client-side normalisation of `..`.
    conn.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
    r = conn.getresponse()
    body = r.read()
    ctype = r.getheader("Content-Type") or ""
    conn.close()
    return r.status, body, ctype


def parse(body: bytes):
    # Python's json reads gptme's bare NaN; sessiondb's null must equal it.
    return json.loads(body)


def norm(v, root: str):
    if isinstance(v, str):
        # Deliberate: a lone surrogate (which gptme sends as a bare `\udXXX` escape) is U+FFFD.
        v = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in v)
        return v.replace(root, "<ROOT>")
    if isinstance(v, list):
        return [norm(x, root) for x in v]
    if isinstance(v, dict):
        return {norm(k, root): norm(x, root) for k, x in v.items()}
    return v


def tie_order(v):
    """A bare-array listing with ties in `modified` put in one order (see the module's doc)."""
    if isinstance(v, list) and v and all(isinstance(c, dict) and "modified" in c and "id" in c for c in v):
        return sorted(v, key=lambda c: (-(c["modified"] or 0), c["id"]))
    return v


def diff(a, b, where: str, out: list[str]):
    """Differences of gptme's `a` and sessiondb's `b`."""
    if isinstance(a, float) and not math.isfinite(a) and b is None:
        return  # deliberate: NaN and infinities -> null
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
        if a == b or abs(a - b) <= FLOAT_TOLERANCE * max(1.0, abs(a)):
            return
        out.append(f"{where}: gptme {a!r}, sessiondb {b!r}")
        return
    if type(a) is not type(b):
        out.append(f"{where}: gptme {a!r}, sessiondb {b!r}")
        return
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in b:
                out.append(f"{where}.{k}: missing in sessiondb (gptme {a[k]!r:.80})")
            elif k not in a:
                out.append(f"{where}.{k}: only in sessiondb ({b[k]!r:.80})")
            else:
                diff(a[k], b[k], f"{where}.{k}", out)
    elif isinstance(a, list):
        if len(a) != len(b):
            out.append(f"{where}: gptme has {len(a)} items, sessiondb {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{where}[{i}]", out)
    elif a != b:
        out.append(f"{where}: gptme {a!r:.120}, sessiondb {b!r:.120}")


def both(path: str, *, ignore_keys: tuple[str, ...] = ()):
    """Asks both servers; returns (status, gptme's JSON, sessiondb's JSON) after comparing
    statuses and, for JSON answers, bodies."""
    global compared
    compared += 1
    sa, ba, ta = fetch(GPTME_URL, path)
    sb, bb, tb = fetch(OURS_URL, path)
    out: list[str] = []
    if sa >= 500 and sb == 200:
        gptme_failed.append(path)
        print(f"GPTME-FAILED {sa} GET {path} (sessiondb answered 200)")
        return sa, None, None
    if sa != sb:
        out.append(f"status: gptme {sa}, sessiondb {sb} (gptme said {ba[:200]!r}, sessiondb {bb[:200]!r})")
    ja = jb = None
    if "json" in ta and "json" in tb:
        ja, jb = tie_order(norm(parse(ba), GPTME_ROOT)), tie_order(norm(parse(bb), OURS_ROOT))
        if isinstance(ja, dict) and isinstance(jb, dict):
            for k in ignore_keys:
                ja.pop(k, None)
                jb.pop(k, None)
        if sa < 400:
            diff(ja, jb, "", out)
        elif not (isinstance(jb, dict) and "error" in jb):
            out.append(f"error answer without an error field: {bb[:200]!r}")
    elif sa == 200 and ba != bb:
        out.append(f"body: gptme {len(ba)} bytes ({ta}), sessiondb {len(bb)} bytes ({tb})")
    print(f"{'ok  ' if not out else 'DIFF'} {sa} GET {path}")
    for o in out:
        print(f"     {o}")
        problems.append(f"GET {path}: {o}")
    return sa, ja, jb


def pages_of_search(q: str):
    """`q=` with `limit` and with pages: sessiondb's answers are the first `limit` of its own
    full answer, and the pages join up into it (gptme's full answer is compared by
    `content_search`)."""
    global compared
    full = json.loads(fetch(OURS_URL, f"/api/v2/conversations?q={urllib.parse.quote(q)}&limit=1000")[1])
    out: list[str] = []
    compared += 1
    two = json.loads(fetch(OURS_URL, f"/api/v2/conversations?q={urllib.parse.quote(q)}&limit=2")[1])
    if [c["id"] for c in two] != [c["id"] for c in full[:2]]:
        out.append(f"limit=2 gives {[c['id'] for c in two]}, not the first two of {[c['id'] for c in full]}")
    ids, cursor = [], None
    for _ in range(100):
        compared += 1
        page = json.loads(fetch(OURS_URL, f"/api/v2/conversations?q={urllib.parse.quote(q)}&paginated=1&limit=2" + (f"&cursor={urllib.parse.quote(cursor)}" if cursor else ""))[1])
        ids += [c["id"] for c in page["conversations"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    expected = [c["id"] for c in sorted(full, key=lambda c: (c["modified"], c["id"]), reverse=True)]
    if ids != expected:
        out.append(f"pages give {ids}, the full answer {expected}")
    print(f"{'ok  ' if not out else 'DIFF'} q={q!r}: limit and pages of sessiondb's answer")
    for o in out:
        print(f"     {o}")
        problems.append(f"q={q!r}: {o}")


def content_search(q: str, extra: str = ""):
    """A `q=` that may match message bodies: gptme's answer is the part of sessiondb's that
    matches by name, id or preview, in order."""
    global compared
    compared += 1
    path = f"/api/v2/conversations?q={urllib.parse.quote(q)}&limit=1000{extra}"
    sa, ba, _ = fetch(GPTME_URL, path)
    sb, bb, _ = fetch(OURS_URL, path)
    ja, jb = norm(parse(ba), GPTME_ROOT), norm(parse(bb), OURS_ROOT)
    out: list[str] = []
    if sa != 200 or sb != 200:
        out.append(f"status: gptme {sa}, sessiondb {sb}")
    else:
        low = q.strip().lower()
        by_meta = [c for c in jb if low in NAMES[c["id"]].lower() or low in c["id"].lower() or low in (c["last_message_preview"] or "").lower()]
        diff(tie_order(ja), tie_order(by_meta), "", out)
        for extra in (c for c in jb if c not in by_meta):
            shown = extra["name"].removeprefix(NAMES[extra["id"]] + " · ")
            if shown == extra["name"] or low not in shown.lower():
                out.append(f"{extra['id']} found by content is named {extra['name']!r}: not its name, ' · ' and the text around {q!r}")
            _, body, _ = fetch(OURS_URL, f"/api/v2/conversations/{urllib.parse.quote(extra['id'])}")
            log = json.loads(body).get("branches", {})
            if not any(low in m["content"].lower() for msgs in log.values() for m in msgs):
                out.append(f"{extra['id']} listed for {q!r} but no message contains it")
    print(f"{'ok  ' if not out else 'DIFF'} {sa} GET {path} (gptme {len(ja) if isinstance(ja, list) else '?'}, sessiondb {len(jb) if isinstance(jb, list) else '?'})")
    for o in out:
        print(f"     {o}")
        problems.append(f"GET {path}: {o}")
    return ja, jb


def config_before_open(cid: str) -> bool:
    """`…/config` before gptme-server opened the conversation: alike with a `config.toml`;
    without one, gptme's 404 and sessiondb's defaults. Returns whether it had none."""
    global compared
    path = f"/api/v2/conversations/{urllib.parse.quote(cid)}/config"
    if os.path.exists(os.path.join(OURS_ROOT, cid, "config.toml")) or not os.path.isdir(os.path.join(OURS_ROOT, cid)):
        both(path)
        return False
    compared += 1
    sa, _, _ = fetch(GPTME_URL, path)
    sb, bb, _ = fetch(OURS_URL, path)
    expected = {"chat": {"stream": True, "interactive": True, "workspace": f"<ROOT>/{cid}/workspace"}, "env": {}}
    out = []
    if sa != 404 or sb != 200:
        out.append(f"status: gptme {sa} (404 expected), sessiondb {sb} (200 expected)")
    elif norm(parse(bb), OURS_ROOT) != expected:
        out.append(f"sessiondb answered {bb[:300]!r}, not gptme's defaults {expected}")
    print(f"{'ok  ' if not out else 'DIFF'} {sa}/{sb} GET {path} (no config.toml)")
    for o in out:
        print(f"     {o}")
        problems.append(f"GET {path}: {o}")
    return True


def config_after_open(cid: str):
    """`…/config` of a conversation without `config.toml` once gptme-server opened it (and
    wrote one): both answers alike but for the workspace."""
    global compared
    compared += 1
    path = f"/api/v2/conversations/{urllib.parse.quote(cid)}/config"
    sa, ba, _ = fetch(GPTME_URL, path)
    sb, bb, _ = fetch(OURS_URL, path)
    out: list[str] = []
    if sa != 200 or sb != 200:
        out.append(f"status: gptme {sa}, sessiondb {sb}")
    else:
        ja, jb = parse(ba), parse(bb)
        for j in (ja, jb):
            j.get("chat", {}).pop("workspace", None)
        diff(ja, jb, "", out)
    print(f"{'ok  ' if not out else 'DIFF'} {sa} GET {path} (after the open; workspace aside)")
    for o in out:
        print(f"     {o}")
        problems.append(f"GET {path}: {o}")


NAMES: dict[str, str] = {}


def main():
    both("/api/v2", ignore_keys=("server",))
    both("/api/v2/version")
    # The listing.
    for query in ["", "?limit=1", "?limit=5", "?limit=1000", "?limit=100000", "?limit=0", "?limit=-3", "?limit=x",
                  "?detail=true", "?detail=1&limit=3", "?detail=yes", "?detail=false", "?detail=",
                  "?q=", "?search=", "?cursor=", "?cursor=abc&paginated=1", "?cursor=1|&paginated=1"]:
        both(f"/api/v2/conversations{query}")
    _, ids, _ = both("/api/v2/conversations?limit=1000")
    ids = [c["id"] for c in ids]
    # Filters on names, ids and previews (gptme's own matching).
    _, listing, ours = both("/api/v2/conversations?limit=1000&detail=true")
    NAMES.update({c["id"]: c["name"] for c in ours})
    probes = {"basic", "2026-07", "CHAT", "unicode", "zzz-no-such-thing"}
    probes |= {c["last_message_preview"].split()[0] for c in listing if c["last_message_preview"]}
    probes |= {c["name"][-6:] for c in listing}
    for q in sorted(probes):
        for detail in ["", "&detail=true"]:
            content_search(q, detail)
        pages_of_search(q)
    # Pages, followed to the end, with and without detail; and a legacy numeric cursor.
    for extra in ["", "&detail=true"]:
        cursor, pages = None, 0
        while True:
            path = f"/api/v2/conversations?paginated=1&limit=3{extra}" + (f"&cursor={urllib.parse.quote(cursor)}" if cursor else "")
            _, page, _ = both(path)
            pages += 1
            cursor = page.get("next_cursor") if isinstance(page, dict) else None
            if not cursor or pages > 50:
                break
    mid = listing[len(listing) // 2]["modified"]
    both(f"/api/v2/conversations?paginated=true&limit=4&cursor={mid!r}")
    # Content search (before any conversation is opened: gptme-server's open rewrites
    # config.toml, which changes its listing).
    for word in ["fibonacci", "the", "ümlauts", "SUMMARY"]:
        content_search(word)
    # One conversation: every id, with message pages; refusals.
    for cid in ids + ["test-hidden-chat", "tmp4f2a9c1e"]:
        q = urllib.parse.quote(cid)
        # Before the conversation is opened: gptme-server's open writes a config.toml.
        without_config = config_before_open(cid)
        for query in ["", "?show_hidden=true", "?root=nowhere"]:
            both(f"/api/v2/conversations/{q}/workspace{query}")
        for query in ["", "?limit=2", "?limit=2&before=3", "?limit=1&before=0", "?limit=100&before=2", "?limit=3&before=1000"]:
            both(f"/api/v2/conversations/{q}{query}")
        if without_config:
            config_after_open(cid)
    one = urllib.parse.quote(ids[0])
    for query in ["?limit=0", "?limit=-1", "?limit=x", "?before=2", "?limit=2&before=-1", "?limit=2&before=x"]:
        both(f"/api/v2/conversations/{one}{query}")
    for bad in ["no-such-conversation", "a..b", "%20lead", "x" * 300]:
        both(f"/api/v2/conversations/{bad}")
        both(f"/api/v2/conversations/{bad}/config")
    # Files: attachments by their relative paths, the workspace, and escapes.
    for cid in ids:
        _, conv, _ = both(f"/api/v2/conversations/{urllib.parse.quote(cid)}")
        for msg in (conv or {}).get("log", []):
            for f in msg.get("files", []):
                if "://" not in f and not f.startswith("/"):
                    both(f"/api/v2/conversations/{urllib.parse.quote(cid)}/files/{urllib.parse.quote(f)}")
    for path in ["conversation.jsonl", "config.toml", "nope.txt", "../2026-07-01-basic-chat/conversation.jsonl",
                 "%2E%2E/2026-07-01-basic-chat/conversation.jsonl", "a/../../x", "workspace/../config.toml", "/etc/passwd", "%2Fetc%2Fpasswd"]:
        both(f"/api/v2/conversations/2026-07-01-basic-chat/files/{path}")
    print(f"{compared} requests compared, {len(problems)} differences; gptme-server failed (5xx) on {len(gptme_failed)} that sessiondb answered")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
