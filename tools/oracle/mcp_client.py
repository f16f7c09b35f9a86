#!/usr/bin/env python3
"""gptme's own MCP client against an MCP server, for sessiondb's interop tests (no model).

    $GPTME_PYTHON tools/oracle/mcp_client.py SERVER_NAME < CALLS.json

gptme's user configuration (``$HOME/.config/gptme/config.toml``, written by the test with the
``[[mcp.servers]]`` entry the README gives) names the server. Reads a JSON list of calls
``[{"tool": NAME, "arguments": {...}}, ...]`` on stdin and prints ONE JSON document:

    {"tools": [every tool as listed: name, description, inputSchema],
     "results": [for each call: {"text": what gptme's MCPClient.call_tool returned,
                                 "is_error": the result's isError,
                                 "pages": with "follow": true in the call, the text of every
                                          page, the call repeated with "cursor" set to the
                                          last page's "more" until it is null} or
                                {"exception": "Type: message"}],
     "agent_tools": [names of the tools gptme gives its agent (get_available_tools())],
     "agent_descriptions": {name: the description gptme shows the model}}

Calls go through ``gptme.mcp.client.MCPClient`` (connect, list tools, ``call_tool``) exactly
as gptme's MCP tool adapter does; ``is_error`` is read on the same session with the SDK's
``ClientSession.call_tool`` (gptme's ``call_tool`` returns only the text).
"""

import json
import sys


def main() -> int:
    server = sys.argv[1]
    calls = json.load(sys.stdin)

    from gptme.config import get_config
    from gptme.mcp.client import MCPClient

    config = get_config()
    client = MCPClient(config=config)
    tools, session = client.connect(server)
    out: dict = {
        "tools": [
            {"name": t.name, "description": t.description, "inputSchema": t.inputSchema}
            for t in tools.tools
        ],
        "results": [],
    }
    for call in calls:
        arguments = dict(call.get("arguments", {}))
        try:
            text = client.call_tool(call["tool"], arguments)
            raw = client._run_async(session.call_tool(call["tool"], arguments))
            result = {"text": text, "is_error": bool(raw.isError)}
            if call.get("follow"):
                # Every page, following the "more" cursor to the end.
                result["pages"] = [text]
                while (more := json.loads(text)["more"]) is not None:
                    if len(result["pages"]) > 1000:
                        raise RuntimeError("the cursor does not end")
                    text = client.call_tool(call["tool"], {**arguments, "cursor": more})
                    result["pages"].append(text)
            out["results"].append(result)
        except Exception as e:  # a protocol error: reported, the next call still made
            out["results"].append({"exception": f"{type(e).__name__}: {e}"})
    client.close()

    # What gptme's agent is given: the tool specs, MCP ones included, from the same config.
    from gptme.tools import get_available_tools

    specs = [t for t in get_available_tools() if t.name.startswith(server + ".")]
    out["agent_tools"] = sorted(t.name for t in specs)
    out["agent_descriptions"] = {t.name: t.desc for t in specs}
    from gptme.tools.mcp_adapter import get_mcp_clients

    for c in list(get_mcp_clients().values()):
        c.close()
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
