//! MCP's stdio transport: JSON-RPC 2.0 messages, one per line, on standard input and output.
//!
//! Invariant: every line read gets exactly the answer JSON-RPC asks for — one response per
//! request (a result or an error, with the request's id), nothing for a notification or a
//! response, an error with a null id for a line that is not JSON (`-32700`) or not a request
//! (`-32600`) — and nothing else is ever written to standard output. No input ends the loop:
//! a malformed line, an unknown method, a line too long to hold (over [`MAX_LINE`]), a tool
//! that fails or even panics is answered and the next line read; only the end of input (the
//! client went away) stops the server.

use std::io::{BufRead, Write};

use serde_json::{json, Map, Value};

/// The longest line held in memory; a longer one is read to its end, dropped, and answered
/// with a parse error.
pub const MAX_LINE: usize = 16 << 20;

/// The protocol revisions this server speaks, newest first. A client asking for another one
/// is offered the newest (the client then decides whether it can go on).
const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

// JSON-RPC's error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;

/// What the server offers: its tools, and how to call one.
pub trait Tools {
    /// The `tools` of a `tools/list` result.
    fn list(&self) -> Vec<Value>;
    /// Calls tool `name`: the `CallToolResult` (a tool's own failure is a result with
    /// `isError`), or `None` when there is no such tool.
    fn call(&self, name: &str, arguments: &Map<String, Value>) -> Option<Value>;
    /// What `initialize` tells the client about the server (its `instructions`).
    fn instructions(&self) -> &str;
}

/// One line read: its bytes, or how long it was when it was too long to keep.
enum Line {
    Whole(Vec<u8>),
    TooLong(usize),
}

/// Reads the next line (without its newline), keeping at most [`MAX_LINE`] bytes of it.
/// `None` at the end of input.
fn next_line(input: &mut impl BufRead) -> std::io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut length = 0usize;
    loop {
        let buf = match input.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            if length == 0 {
                return Ok(None);
            }
            return Ok(Some(if length > MAX_LINE { Line::TooLong(length) } else { Line::Whole(line) }));
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (&buf[..at], Some(at + 1)),
            None => (buf, None),
        };
        length += chunk.len();
        if length <= MAX_LINE {
            line.extend_from_slice(chunk);
        } else {
            line = Vec::new();
        }
        let used = done.unwrap_or(buf.len());
        input.consume(used);
        if done.is_some() {
            return Ok(Some(if length > MAX_LINE { Line::TooLong(length) } else { Line::Whole(line) }));
        }
    }
}

/// Serves `tools` over `input` and `output` until the end of input.
pub fn serve(input: &mut impl BufRead, output: &mut impl Write, tools: &dyn Tools) -> std::io::Result<()> {
    while let Some(line) = next_line(input)? {
        let answer = match line {
            Line::TooLong(n) => Some(error(Value::Null, PARSE_ERROR, &format!("Parse error: a message of {n} bytes, over the {MAX_LINE} this server reads"))),
            Line::Whole(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => None,
            Line::Whole(bytes) => answer_bytes(&bytes, tools),
        };
        if let Some(answer) = answer {
            let mut text = serde_json::to_vec(&answer).expect("JSON values serialise");
            text.push(b'\n');
            output.write_all(&text)?;
            output.flush()?;
        }
    }
    Ok(())
}

/// The answer to one JSON-RPC message as a transport received it — a line on stdio, or the body
/// of a POST to a streamable HTTP endpoint — a message or a batch (an array) of them: `None`
/// when nothing is to be sent back (notifications and responses only).
pub fn answer_bytes(bytes: &[u8], tools: &dyn Tools) -> Option<Value> {
    let message: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => return Some(error(Value::Null, PARSE_ERROR, &format!("Parse error: {e}"))),
    };
    match message {
        Value::Array(batch) if batch.is_empty() => Some(error(Value::Null, INVALID_REQUEST, "Invalid Request: an empty batch")),
        Value::Array(batch) => {
            let answers: Vec<Value> = batch.into_iter().filter_map(|m| answer(m, tools)).collect();
            (!answers.is_empty()).then_some(Value::Array(answers))
        }
        other => answer(other, tools),
    }
}

/// The answer to one message: `None` for a notification or a response.
fn answer(message: Value, tools: &dyn Tools) -> Option<Value> {
    let Value::Object(mut message) = message else {
        return Some(error(Value::Null, INVALID_REQUEST, "Invalid Request: a message is a JSON object"));
    };
    let id = message.remove("id");
    let id_ok = matches!(id, None | Some(Value::String(_)) | Some(Value::Number(_)));
    let method = match message.remove("method") {
        Some(Value::String(m)) => m,
        // A response to a request of ours (the server sends none): nothing to answer.
        None if id_ok && (message.contains_key("result") || message.contains_key("error")) => return None,
        _ => return Some(error(if id_ok { id.unwrap_or(Value::Null) } else { Value::Null }, INVALID_REQUEST, "Invalid Request: no method")),
    };
    if !id_ok || message.get("jsonrpc") != Some(&json!("2.0")) {
        let id = if id_ok { id.unwrap_or(Value::Null) } else { Value::Null };
        return Some(error(id, INVALID_REQUEST, "Invalid Request: a request has \"jsonrpc\": \"2.0\" and a string or number id"));
    }
    let params = match message.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => return id.map(|id| error(id, INVALID_PARAMS, "Invalid params: params is an object")),
    };
    // A notification (no id) is never answered, whatever it says.
    let id = id?;
    // Nothing a tool does may take the server down: a panic is answered as an internal error.
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| request(&method, &params, tools)));
    Some(match outcome {
        Ok(Ok(result)) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Ok(Err((code, message))) => error(id, code, &message),
        Err(_) => error(id, INTERNAL_ERROR, &format!("Internal error: {method} failed; the server goes on")),
    })
}

/// The result of request `method`, or its error code and message.
fn request(method: &str, params: &Map<String, Value>, tools: &dyn Tools) -> Result<Value, (i64, String)> {
    match method {
        "initialize" => {
            let asked = params.get("protocolVersion").and_then(Value::as_str);
            let version = PROTOCOL_VERSIONS.iter().find(|v| Some(**v) == asked).unwrap_or(&PROTOCOL_VERSIONS[0]);
            Ok(json!({
                "protocolVersion": version,
                "capabilities": { "tools": { "listChanged": false } },
                "serverInfo": { "name": "sessiondb", "version": env!("CARGO_PKG_VERSION") },
                "instructions": tools.instructions(),
            }))
        }
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({ "tools": tools.list() })),
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str).ok_or((INVALID_PARAMS, "Invalid params: tools/call needs the tool's \"name\"".to_owned()))?;
            let empty = Map::new();
            let arguments = match params.get("arguments") {
                None | Some(Value::Null) => &empty,
                Some(Value::Object(a)) => a,
                Some(_) => return Err((INVALID_PARAMS, "Invalid params: \"arguments\" is an object".to_owned())),
            };
            tools.call(name, arguments).ok_or_else(|| {
                let names: Vec<String> = tools.list().iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect();
                (INVALID_PARAMS, format!("Unknown tool: {name:?}; this server has {}", names.join(", ")))
            })
        }
        _ => Err((METHOD_NOT_FOUND, format!("Method not found: {method:?}"))),
    }
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo;

    impl Tools for Echo {
        fn list(&self) -> Vec<Value> {
            vec![json!({ "name": "echo", "inputSchema": { "type": "object" } })]
        }
        fn call(&self, name: &str, arguments: &Map<String, Value>) -> Option<Value> {
            match name {
                "echo" => Some(json!({ "content": [{ "type": "text", "text": Value::Object(arguments.clone()).to_string() }] })),
                "panic" => panic!("a tool that panics"),
                _ => None,
            }
        }
        fn instructions(&self) -> &str {
            "echoes"
        }
    }

    fn run(input: &[u8]) -> Vec<Value> {
        let mut out = Vec::new();
        serve(&mut &input[..], &mut out, &Echo).unwrap();
        String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    #[test]
    fn every_request_is_answered_and_nothing_else() {
        let input = concat!(
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\"}}\n",
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
            "\n",
            "not json\n",
            "[]\n",
            "42\n",
            "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"no/such\"}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":null}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"panic\"}}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"nope\"}}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{}}\n",
            "[{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"},{\"jsonrpc\":\"2.0\",\"method\":\"x\"}]\n",
            "{\"jsonrpc\":\"2.0\",\"id\":\"8\",\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"a\":1}}}",
        );
        let out = run(input.as_bytes());
        let codes: Vec<Value> = out.iter().map(|a| a.get("error").map_or(json!("ok"), |e| e["code"].clone())).collect();
        assert_eq!(
            codes,
            [
                json!("ok"),
                json!(-32700),
                json!(-32600),
                json!(-32600),
                json!(-32600),
                json!(-32601),
                json!(-32602),
                json!(-32603),
                json!(-32602),
                json!("ok"),
                json!("ok")
            ]
        );
        assert_eq!(out[0]["result"]["protocolVersion"], "2025-06-18");
        assert_eq!(out[9], json!([{ "jsonrpc": "2.0", "id": 7, "result": {} }]));
        assert_eq!(out[10]["id"], "8");
        assert_eq!(out[10]["result"]["content"][0]["text"], "{\"a\":1}");
    }

    #[test]
    fn an_unknown_protocol_version_is_offered_the_newest() {
        let out = run(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"1999-01-01\"}}\n");
        assert_eq!(out[0]["result"]["protocolVersion"], PROTOCOL_VERSIONS[0]);
    }

    #[test]
    fn a_line_too_long_is_answered_and_the_next_one_read() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
        let out = run(&input);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0]["error"]["code"], PARSE_ERROR);
        assert_eq!(out[1]["result"], json!({}));
    }
}
