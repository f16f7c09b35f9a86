#!/usr/bin/env python3
"""A scripted model on 127.0.0.1, for driving real coding agents (Claude Code, Codex) offline.

    python3 tools/oracle/model_server.py SCRIPT.json RECORD.jsonl

Prints the port it listens on (one line) and serves until killed. It speaks the two APIs the
agents use, streamed or not:

  * Anthropic's Messages API, ``POST /v1/messages`` (Claude Code, with ``ANTHROPIC_BASE_URL``);
  * OpenAI's Responses API, ``POST /v1/responses`` (Codex, with a ``model_providers`` entry whose
    ``base_url`` is ``http://127.0.0.1:PORT/v1``; Codex 0.171.0 no longer speaks Chat
    Completions: ``wire_api = "chat"`` is refused).

SCRIPT is ``{"calls": [{"tool": NAME, "arguments": {...}}, ...], "final": TEXT}`` (an argument
``"$more"`` stands for the ``"more"`` cursor of the last result of the same tool). A request
that offers the scripted tools (an agent's turn: a tool whose name ends in ``NAME`` and contains
``sessiondb``, as agents prefix a server's tools, ``mcp__sessiondb__NAME``) is answered with the
next call of the script — the calls the conversation it sends already holds say how far it is —
and once every call has its result, with TEXT. Both agents name an MCP server's tools without
their schemas at first ("deferred") and expect the model to load them: the server then calls
their search tool first, once (Claude Code's ``ToolSearch`` with ``select:`` and the names,
Codex's ``tool_search`` with the tools' words). Every other request (a title, a summary, a check
of the key) gets a short text; ``GET …/models`` an empty list, ``…/count_tokens`` a count.
Nothing is kept between requests but the record: the script's position is read from each
request's history, as a real model would see it.

RECORD gets one JSON object a line, flushed as it goes:

  * ``{"event": "request", "api": "anthropic"|"responses", "model": ..., "tools": [names],
    "deferred": [names], "turn": bool}`` for each request to the model;
  * ``{"event": "tool_search", "query": ...}`` when the server loads the deferred tools;
  * ``{"event": "tool_result", "api": ..., "call_id": ..., "tool": NAME, "content": RAW}``,
    the first time a request carries the result of one of the script's calls: RAW is the
    result exactly as the agent sent it to the model (Claude Code: ``{"content": blocks,
    "is_error": bool}``; Codex: the call's ``output``, a string or content items);
  * ``{"event": "connect", "target": HOST:PORT}`` for a proxy request (``CONNECT`` or an absolute
    URL): the test points ``HTTPS_PROXY`` and ``HTTP_PROXY`` here, so a request for any other
    host is refused (403) and recorded instead of leaving the machine;
  * ``{"event": "unknown", "method": ..., "path": ...}`` for anything else (answered 404).
"""

import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCRIPT: dict = {}
RECORD = None
LOCK = threading.Lock()
SEEN: set = set()


def record(event: dict) -> None:
    with LOCK:
        RECORD.write(json.dumps(event, ensure_ascii=False) + "\n")
        RECORD.flush()


def scripted_name(tools: list, tool: str):
    """The name under which the agent offers the script's `tool`, or None."""
    for name in tools:
        if name.endswith(tool) and "sessiondb" in name:
            return name
    return None


def script_tool(name: str):
    """The script's tool that agent tool `name` is, or None."""
    for call in SCRIPT["calls"]:
        if name.endswith(call["tool"]) and "sessiondb" in name:
            return call["tool"]
    return None


def texts(raw) -> list:
    """The text parts of a tool result as an agent sent it (a string, or content blocks)."""
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, dict):
        return texts(raw.get("content"))
    return [part.get("text", "") for part in raw or [] if isinstance(part, dict)]


def more_of(raw):
    """The "more" cursor of a sessiondb answer among the text parts of a tool result."""
    for text in texts(raw):
        try:
            answer = json.loads(text)
        except ValueError:
            continue
        if isinstance(answer, dict) and "more" in answer:
            return answer["more"]
    return None


def next_step(tools: list, calls_made: int, results: list):
    """("call", agent tool name, arguments) for the next call, or ("text", TEXT). `results` are
    the raw results of the calls made, in order: an argument "$more" is the "more" of the last
    result of the same tool (a page read on, as a model pages)."""
    if calls_made < len(SCRIPT["calls"]):
        call = SCRIPT["calls"][calls_made]
        name = scripted_name(tools, call["tool"])
        if name is None:
            return ("text", f"the agent does not offer {call['tool']}")
        arguments = dict(call["arguments"])
        for key, value in arguments.items():
            if value == "$more":
                earlier = [r for c, r in zip(SCRIPT["calls"], results) if c["tool"] == call["tool"]]
                arguments[key] = more_of(earlier[-1]) if earlier else None
        return ("call", name, arguments)
    return ("text", SCRIPT["final"])


def note_result(api: str, call_id: str, tool, content) -> None:
    key = (api, call_id)
    with LOCK:
        if key in SEEN:
            return
        SEEN.add(key)
    record({"event": "tool_result", "api": api, "call_id": call_id, "tool": tool, "content": content})


# --- Anthropic Messages -------------------------------------------------------------------


def anthropic(body: dict):
    """The message (content blocks and stop reason) answering a Messages request."""
    tools = [t.get("name", "") for t in body.get("tools") or [] if not t.get("defer_loading")]
    # Claude Code offers an MCP server's tools by name only, in a message ("deferred"), until
    # the model loads their schemas with its ToolSearch tool.
    deferred = sorted(set(re.findall(r"mcp__sessiondb__[A-Za-z0-9_]+", json.dumps(body))) - set(tools))
    names = {}
    results = []
    calls_made = 0
    searches = 0
    for message in body.get("messages", []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_use" and block.get("name") == "ToolSearch":
                searches += 1
            elif block.get("type") == "tool_use" and script_tool(block.get("name", "")):
                names[block["id"]] = script_tool(block["name"])
                calls_made += 1
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in names:
                raw = {"content": block.get("content"), "is_error": block.get("is_error", False)}
                note_result("anthropic", block["tool_use_id"], names[block["tool_use_id"]], raw)
                results.append(raw)
    turn = any(scripted_name(tools + deferred, c["tool"]) for c in SCRIPT["calls"])
    record({"event": "request", "api": "anthropic", "model": body.get("model"), "tools": tools, "deferred": deferred, "turn": turn})
    if not turn:
        return [{"type": "text", "text": "ok"}], "end_turn"
    step = next_step(tools + deferred, calls_made, results)
    if step[0] == "call" and step[1] not in tools and "ToolSearch" in tools and searches == 0:
        # Load the schemas first, as the model is told to.
        query = "select:" + ",".join(scripted_name(tools + deferred, c["tool"]) or c["tool"] for c in SCRIPT["calls"])
        record({"event": "tool_search", "query": query})
        return [{"type": "tool_use", "id": "toolu_search", "name": "ToolSearch", "input": {"query": query}}], "tool_use"
    if step[0] == "call":
        return [{"type": "tool_use", "id": f"toolu_{calls_made:04d}", "name": step[1], "input": step[2]}], "tool_use"
    return [{"type": "text", "text": step[1]}], "end_turn"


def anthropic_events(model: str, blocks: list, stop: str):
    usage = {"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    yield "message_start", {
        "type": "message_start",
        "message": {"id": "msg_scripted", "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage},
    }
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}
            yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": block["text"]}}
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            yield "content_block_start", {"type": "content_block_start", "index": i, "content_block": start}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5}}
    yield "message_stop", {"type": "message_stop"}


# --- OpenAI Responses ---------------------------------------------------------------------


def openai_tools(tools: list) -> dict:
    """{agent name: (namespace or None, name)} of Responses tool definitions."""
    found = {}
    for t in tools or []:
        if t.get("type") == "function":
            found[t.get("name", "")] = (None, t.get("name", ""))
        elif t.get("type") == "namespace":
            # A server's tools grouped under its name (as Codex offers MCP tools).
            for inner in t.get("tools") or []:
                found[f"{t.get('name', '')}__{inner.get('name', '')}"] = (t.get("name"), inner.get("name", ""))
        elif "name" in t:
            found[t["name"]] = (None, t["name"])
    return found


def responses(body: dict):
    """The output items answering a Responses request."""
    offered = openai_tools(body.get("tools"))
    items = body.get("input") if isinstance(body.get("input"), list) else []
    # Codex offers an MCP server's tools by namespace only ("deferred") until the model finds
    # them with its tool_search tool, whose output then holds their definitions.
    for item in items:
        if item.get("type") == "tool_search_output":
            offered.update(openai_tools(item.get("tools")))
    tools = list(offered)
    deferred = sorted(set(re.findall(r"mcp__sessiondb\b", json.dumps(body))))
    names = {}
    results = []
    calls_made = 0
    searches = 0
    for item in items:
        kind = item.get("type")
        if kind == "tool_search_call":
            searches += 1
        full = f"{item.get('namespace')}__{item.get('name', '')}" if item.get("namespace") else item.get("name", "")
        if kind == "function_call" and script_tool(full):
            names[item["call_id"]] = script_tool(full)
            calls_made += 1
        elif kind in ("function_call_output", "custom_tool_call_output") and item.get("call_id") in names:
            note_result("responses", item["call_id"], names[item["call_id"]], item.get("output"))
            results.append(item.get("output"))
    turn = any(scripted_name(tools, c["tool"]) for c in SCRIPT["calls"]) or bool(deferred)
    record({"event": "request", "api": "responses", "model": body.get("model"), "tools": tools, "deferred": deferred, "turn": turn})
    if not turn:
        text = "ok"
    else:
        step = next_step(tools, calls_made, results)
        if step[0] == "text" and deferred and searches == 0 and any(t.get("type") == "tool_search" for t in body.get("tools") or []):
            query = "sessiondb " + " ".join(c["tool"].replace("_", " ") for c in SCRIPT["calls"])
            record({"event": "tool_search", "query": query})
            return [{"type": "tool_search_call", "id": "ts_0000", "call_id": "search_0000", "execution": "client", "status": "completed", "arguments": {"query": query, "limit": 8}}]
        if step[0] == "call":
            namespace, name = offered[step[1]]
            call = {"type": "function_call", "id": f"fc_{calls_made:04d}", "call_id": f"call_{calls_made:04d}", "name": name, "arguments": json.dumps(step[2]), "status": "completed"}
            if namespace:
                call["namespace"] = namespace
            return [call]
        text = step[1]
    return [{"type": "message", "id": "msg_scripted", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}]


def responses_events(model: str, output: list):
    response = {"id": "resp_scripted", "object": "response", "model": model, "status": "in_progress", "output": []}
    yield "response.created", {"type": "response.created", "response": response}
    for i, item in enumerate(output):
        yield "response.output_item.added", {"type": "response.output_item.added", "output_index": i, "item": {**item, "status": "in_progress"}}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield "response.output_text.delta", {"type": "response.output_text.delta", "item_id": item["id"], "output_index": i, "content_index": 0, "delta": text}
        yield "response.output_item.done", {"type": "response.output_item.done", "output_index": i, "item": item}
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
    yield "response.completed", {"type": "response.completed", "response": {**response, "status": "completed", "output": output, "usage": usage}}


# --- HTTP ---------------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def send_json(self, status: int, value) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_events(self, events, named: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for name, data in events:
            head = f"event: {name}\n" if named else ""
            self.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()
        self.close_connection = True

    def refuse_proxy(self) -> None:
        record({"event": "connect", "target": self.path})
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def do_CONNECT(self):  # noqa: N802 - http.server's naming
        self.refuse_proxy()

    def do_GET(self):  # noqa: N802
        if self.path.startswith("http"):
            return self.refuse_proxy()
        path = self.path.split("?")[0]
        if path.endswith("/models"):
            # No model list: the agent goes on with what it knows of its model.
            return self.send_json(200, {"object": "list", "data": [], "models": []})
        record({"event": "unknown", "method": "GET", "path": self.path})
        self.send_json(404, {"error": {"type": "not_found", "message": f"no {self.path} here"}})

    def do_HEAD(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):  # noqa: N802
        if self.path.startswith("http"):
            return self.refuse_proxy()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.headers.get("Content-Encoding") == "zstd":
            record({"event": "unknown", "method": "POST", "path": self.path, "why": "zstd body"})
            return self.send_json(415, {"error": {"message": "compressed bodies are not read here"}})
        body = json.loads(raw or b"{}")
        path = self.path.split("?")[0]
        model = body.get("model") or "scripted"
        if path.endswith("/messages/count_tokens"):
            return self.send_json(200, {"input_tokens": 10})
        if path.endswith("/messages"):
            blocks, stop = anthropic(body)
            if body.get("stream"):
                return self.send_events(anthropic_events(model, blocks, stop), named=True)
            usage = {"input_tokens": 10, "output_tokens": 5}
            return self.send_json(200, {"id": "msg_scripted", "type": "message", "role": "assistant", "model": model, "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage})
        if path.endswith("/responses"):
            output = responses(body)
            if body.get("stream", True):
                return self.send_events(responses_events(model, output), named=True)
            return self.send_json(200, {"id": "resp_scripted", "object": "response", "status": "completed", "model": model, "output": output})
        record({"event": "unknown", "method": "POST", "path": self.path})
        self.send_json(404, {"error": {"type": "not_found", "message": f"no {self.path} here"}})


def main() -> int:
    global SCRIPT, RECORD
    with open(sys.argv[1], encoding="utf-8") as f:
        SCRIPT = json.load(f)
    RECORD = open(sys.argv[2], "a", encoding="utf-8")  # noqa: SIM115 - open for the server's life
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
