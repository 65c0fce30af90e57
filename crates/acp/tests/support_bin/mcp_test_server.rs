//! `keel-mcp-test-server`: a real MCP server written for Keel's tests (hand-written JSON-RPC,
//! std and serde_json only), over stdio or, with `--http PORT_FILE`, streamable HTTP on
//! 127.0.0.1 (JSON responses, no SSE stream: `GET` answers 405).
//!
//! Tools: `echo {text}` answers `echo: TEXT`; `read_note {name}` (read-only hint) answers the
//! note's name; `wipe {}` (destructive hint) answers `wiped`; `slow {}` answers after ten
//! minutes (the test cancels it); `crash {}` exits the process before answering. `--tools N`
//! adds N generated tools `tool_NNNN`. `--hang` reads its input and never answers (a server
//! that never starts). `--log FILE` appends every method received (and `cancelled ID` for a
//! cancellation); `--pid-file FILE` records the process id. Prompt: `review {file, focus?}`.
//! `--probe` adds three tools that report what the server's process can do: `whereami {}`
//! (its working directory), `try_read {path}` (`read N bytes: TEXT` or `cannot read: ERROR`),
//! `try_write {path}` (`wrote` or `cannot write: ERROR`) and `getenv {name}`.
//! `--write-at-start FILE` writes FILE before anything else and, when it cannot, says why on
//! stderr and exits 3 (a server that fails to start).

#![expect(
    clippy::disallowed_methods,
    reason = "a test server of its own, not Keel: it writes its log, port and pid files directly"
)]
#![expect(
    clippy::disallowed_types,
    reason = "a test server of its own, not Keel: it appends to its log directly"
)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

#[derive(Default)]
struct Options {
    http: Option<String>,
    log: Option<String>,
    pid_file: Option<String>,
    hang: bool,
    tools: usize,
    probe: bool,
    write_at_start: Option<String>,
}

fn options() -> Options {
    let mut out = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--http" => out.http = args.next(),
            "--log" => out.log = args.next(),
            "--pid-file" => out.pid_file = args.next(),
            "--hang" => out.hang = true,
            "--probe" => out.probe = true,
            "--write-at-start" => out.write_at_start = args.next(),
            "--tools" => out.tools = args.next().and_then(|n| n.parse().ok()).unwrap_or(0),
            _ => {}
        }
    }
    out
}

fn log(options: &Options, line: &str) {
    if let Some(path) = &options.log
        && let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    {
        let _ = writeln!(file, "{line}");
    }
}

fn tools(count: usize, probe: bool) -> Vec<Value> {
    let mut tools = vec![
        json!({"name": "echo", "description": "Echo the text back.",
               "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                   "properties": {"text": {"type": "string"}}, "required": ["text"],
                   "additionalProperties": false}}),
        json!({"name": "read_note", "description": "Read a note by name.",
               "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                   "required": ["name"]},
               "annotations": {"readOnlyHint": true}}),
        json!({"name": "wipe", "description": "Wipe every note.",
               "inputSchema": {"type": "object", "properties": {}},
               "annotations": {"readOnlyHint": false, "destructiveHint": true}}),
        json!({"name": "slow", "description": "Answer after ten minutes.",
               "inputSchema": {"type": "object", "properties": {}}}),
        json!({"name": "crash", "description": "Exit before answering.",
               "inputSchema": {"type": "object", "properties": {}}}),
    ];
    if probe {
        let path = json!({"type": "object", "properties": {"path": {"type": "string"}},
            "required": ["path"]});
        tools.push(
            json!({"name": "whereami", "description": "The working directory.",
            "inputSchema": {"type": "object", "properties": {}}}),
        );
        tools.push(json!({"name": "try_read", "description": "Read a file.",
            "inputSchema": path.clone()}));
        tools.push(json!({"name": "try_write", "description": "Write a file.",
            "inputSchema": path}));
        tools.push(
            json!({"name": "getenv", "description": "An environment variable.",
            "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                "required": ["name"]}}),
        );
    }
    for n in 0..count {
        tools.push(json!({
            "name": format!("tool_{n:04}"),
            "description": format!("Generated tool number {n}: reports the weather of city {n}."),
            "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}
        }));
    }
    tools
}

/// What a request gets: an immediate result, a delayed one, or the process exits.
enum Reply {
    Now(Value),
    Later(Value, Duration),
    None,
}

fn handle(options: &Options, message: &Value) -> Reply {
    let method = message.get("method").and_then(Value::as_str).unwrap_or("");
    let id = message.get("id").cloned();
    if method == "notifications/cancelled" {
        let cancelled = message["params"]["requestId"].to_string();
        log(options, &format!("cancelled {cancelled}"));
    } else {
        log(options, method);
    }
    let Some(id) = id else { return Reply::None };
    let ok = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
    match method {
        "initialize" => {
            let version = message["params"]["protocolVersion"]
                .as_str()
                .unwrap_or("2025-06-18")
                .to_owned();
            Reply::Now(ok(json!({
                "protocolVersion": version,
                "capabilities": {"tools": {}, "prompts": {}},
                "serverInfo": {"name": "keel-mcp-test-server", "version": "1.0.0"}
            })))
        }
        "ping" => Reply::Now(ok(json!({}))),
        "tools/list" => Reply::Now(ok(json!({"tools": tools(options.tools, options.probe)}))),
        "prompts/list" => Reply::Now(ok(json!({"prompts": [{
            "name": "review",
            "description": "Review a file.",
            "arguments": [{"name": "file", "required": true}, {"name": "focus"}]
        }]}))),
        "prompts/get" => {
            let args = &message["params"]["arguments"];
            let mut text = format!("Please review {}.", args["file"].as_str().unwrap_or("?"));
            if let Some(focus) = args["focus"].as_str() {
                text.push_str(&format!(" Focus on {focus}."));
            }
            Reply::Now(ok(json!({"messages": [
                {"role": "user", "content": {"type": "text", "text": text}}
            ]})))
        }
        "tools/call" => {
            let name = message["params"]["name"].as_str().unwrap_or("");
            let args = &message["params"]["arguments"];
            let text = |t: String| ok(json!({"content": [{"type": "text", "text": t}]}));
            match name {
                "echo" => Reply::Now(text(format!(
                    "echo: {}",
                    args["text"].as_str().unwrap_or("")
                ))),
                "read_note" => Reply::Now(text(format!(
                    "note {}",
                    args["name"].as_str().unwrap_or("")
                ))),
                "wipe" => Reply::Now(text("wiped".into())),
                "slow" => Reply::Later(text("slow done".into()), Duration::from_secs(600)),
                "crash" => std::process::exit(3),
                "whereami" => Reply::Now(text(
                    std::env::current_dir()
                        .map(|dir| dir.display().to_string())
                        .unwrap_or_else(|e| format!("no working directory: {e}")),
                )),
                "try_read" => Reply::Now(text(
                    match std::fs::read_to_string(args["path"].as_str().unwrap_or("")) {
                        Ok(content) => format!("read {} bytes: {content}", content.len()),
                        Err(e) => format!("cannot read: {e}"),
                    },
                )),
                "try_write" => Reply::Now(text(
                    match std::fs::write(
                        args["path"].as_str().unwrap_or(""),
                        "written by the server\n",
                    ) {
                        Ok(()) => "wrote".to_owned(),
                        Err(e) => format!("cannot write: {e}"),
                    },
                )),
                "getenv" => Reply::Now(text(
                    std::env::var(args["name"].as_str().unwrap_or(""))
                        .unwrap_or_else(|_| "(unset)".to_owned()),
                )),
                other if other.starts_with("tool_") => Reply::Now(text(format!(
                    "{other}: sunny in {}",
                    args["city"].as_str().unwrap_or("?")
                ))),
                other => Reply::Now(json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32602, "message": format!("unknown tool {other}")}})),
            }
        }
        _ => Reply::Now(json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": format!("method not found: {method}")}})),
    }
}

fn stdio(options: Arc<Options>) {
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let send = |out: &Arc<Mutex<std::io::Stdout>>, value: &Value| {
        let mut out = out
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = writeln!(out, "{value}");
        let _ = out.flush();
    };
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if options.hang {
            continue;
        }
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        match handle(&options, &message) {
            Reply::Now(value) => send(&out, &value),
            Reply::Later(value, delay) => {
                let out = out.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(delay);
                    send(&out, &value);
                });
            }
            Reply::None => {}
        }
    }
}

fn respond(stream: &mut TcpStream, status: &str, body: Option<&Value>) {
    let body = body.map(Value::to_string).unwrap_or_default();
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}

fn connection(options: &Options, mut stream: TcpStream) {
    let Ok(clone) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(clone);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let method = request_line.split_whitespace().next().unwrap_or("");
    match method {
        "POST" => {
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                return;
            }
            let Ok(message) = serde_json::from_slice::<Value>(&body) else {
                respond(&mut stream, "400 Bad Request", None);
                return;
            };
            match handle(options, &message) {
                Reply::Now(value) => respond(&mut stream, "200 OK", Some(&value)),
                Reply::Later(value, delay) => {
                    std::thread::sleep(delay);
                    respond(&mut stream, "200 OK", Some(&value));
                }
                Reply::None => respond(&mut stream, "202 Accepted", None),
            }
        }
        "DELETE" => respond(&mut stream, "200 OK", None),
        _ => respond(&mut stream, "405 Method Not Allowed", None),
    }
}

fn http(options: Arc<Options>, port_file: &str) -> std::io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    std::fs::write(format!("{port_file}.tmp"), port.to_string())?;
    std::fs::rename(format!("{port_file}.tmp"), port_file)?;
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let options = options.clone();
        std::thread::spawn(move || connection(&options, stream));
    }
    Ok(())
}

fn main() {
    let options = Arc::new(options());
    if let Some(path) = &options.write_at_start
        && let Err(e) = std::fs::write(path, "started\n")
    {
        let mut stderr = std::io::stderr();
        let _ = writeln!(stderr, "keel-mcp-test-server: starting up");
        let _ = writeln!(stderr, "cannot write {path}: {e}");
        std::process::exit(3);
    }
    if let Some(path) = &options.pid_file {
        let _ = std::fs::write(path, std::process::id().to_string());
    }
    match options.http.clone() {
        Some(port_file) => {
            let _ = http(options, &port_file);
        }
        None => stdio(options),
    }
}
