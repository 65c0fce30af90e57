//! Hostile input for an agent's JSON-RPC wire, shared by the property test (a seeded generator
//! of message soups, [`soup`]) and the coverage-guided fuzz target (raw bytes): [`exchange`]
//! feeds lines to a served connection and checks what a well-behaved agent must do with them.
//!
//! What [`exchange`] holds the agent to:
//! - every well-formed request (a `"jsonrpc": "2.0"` object with a string method and an integer
//!   or string id) is answered, with a result or an error, under that id;
//! - a probe request sent after the input is answered: the connection is still usable;
//! - requests the agent sends (permission prompts, file reads) are answered with an error and
//!   never wedge it;
//! - once its input closes, the agent closes its output: nothing keeps it alive.
//!
//! All of it within a time limit; running over it is a finding (a hang).

use std::collections::{BTreeSet, HashSet};
use std::future::Future;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream, ReadHalf,
    WriteHalf,
};
use tokio::sync::mpsc;

/// A small deterministic generator (SplitMix64): the same seed, the same soup.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// What a misbehaving agent did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// Nothing more came within the limit; `waiting` says for what.
    Hang { waiting: String },
    /// The agent closed its output (or its input broke) before answering these ids.
    Ended { unanswered: Vec<String> },
    /// The agent wrote a line that is not JSON.
    NotJson { line: String },
    /// The served connection ended with an error (or its task panicked) once its input closed.
    ServerFailed { error: String },
}

/// What an exchange saw.
#[derive(Debug, Clone, Default)]
pub struct Exchange {
    /// Answers (results and errors) received.
    pub answers: usize,
    /// Requests the agent sent to the client (answered with an error).
    pub agent_requests: usize,
    /// Session ids the agent created.
    pub sessions: usize,
}

/// The method the probe calls; any agent answers it, before or after `initialize`.
const PROBE_METHOD: &str = "session/list";
const PROBE_ID: &str = "keel-fuzz-probe";

/// The agent's ends of an in-memory connection, as [`exchange_served`] hands them to the server.
pub type AgentEnds = (WriteHalf<DuplexStream>, ReadHalf<DuplexStream>);

/// [`exchange`] with a fresh in-process connection: `serve` gets the agent's ends of an
/// in-memory pipe and returns the server's future (e.g. `keel_acp::server::serve_io`), which
/// runs on its own task; the exchange then checks the rules on the client's ends, and the server
/// must end without an error once its input closes.
pub async fn exchange_served<F, E>(
    serve: impl FnOnce(AgentEnds) -> F,
    lines: &[Vec<u8>],
    lockstep: bool,
    limit: Duration,
) -> Result<Exchange, Finding>
where
    F: Future<Output = Result<(), E>> + Send + 'static,
    E: std::fmt::Debug + Send + 'static,
{
    let (agent_end, client_end) = tokio::io::duplex(1 << 16);
    let (agent_read, agent_write) = tokio::io::split(agent_end);
    let (client_read, client_write) = tokio::io::split(client_end);
    let server = tokio::spawn(serve((agent_write, agent_read)));
    let seen = exchange(client_write, client_read, lines, lockstep, limit).await?;
    match server.await {
        Ok(Ok(())) => Ok(seen),
        Ok(Err(error)) => Err(Finding::ServerFailed {
            error: format!("{error:?}"),
        }),
        Err(join) => Err(Finding::ServerFailed {
            error: join.to_string(),
        }),
    }
}

/// Sends `lines` (a newline added to each) to an agent reading `to_agent` and writing
/// `from_agent`, then the probe, and checks the module's rules. In a line, `$SESSION` stands
/// for the newest session id the agent has answered with; `lockstep` waits for each
/// well-formed request's answer before the next line (otherwise everything is pipelined).
pub async fn exchange(
    to_agent: impl AsyncWrite + Unpin + Send + 'static,
    from_agent: impl AsyncRead + Unpin,
    lines: &[Vec<u8>],
    lockstep: bool,
    limit: Duration,
) -> Result<Exchange, Finding> {
    // One writer task, so reading never waits on a full pipe in the other direction.
    let (queue, mut queued) = mpsc::unbounded_channel::<Option<Vec<u8>>>();
    let writer = tokio::spawn(async move {
        let mut to_agent = to_agent;
        while let Some(item) = queued.recv().await {
            let Some(mut line) = item else { break };
            line.push(b'\n');
            if to_agent.write_all(&line).await.is_err() || to_agent.flush().await.is_err() {
                return false;
            }
        }
        to_agent.shutdown().await.is_ok()
    });
    let mut reader = BufReader::new(from_agent).lines();
    let mut seen = Exchange::default();
    let mut expected: BTreeSet<String> = BTreeSet::new();
    let mut answered: HashSet<String> = HashSet::new();
    let mut session = String::from("no-session-yet");
    let mut next = 0;
    let mut awaiting: Option<String> = None;
    let mut probe_sent = false;
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        // Write what may be written now.
        while awaiting.is_none() && next < lines.len() {
            let line = substitute(&lines[next], &session);
            next += 1;
            if let Some(id) = well_formed_request_id(&line) {
                expected.insert(id.clone());
                if lockstep && !answered.contains(&id) {
                    awaiting = Some(id);
                }
            }
            let _ = queue.send(Some(line));
        }
        if awaiting.is_none() && next == lines.len() && !probe_sent {
            probe_sent = true;
            expected.insert(id_key(&json!(PROBE_ID)));
            let probe =
                json!({"jsonrpc": "2.0", "id": PROBE_ID, "method": PROBE_METHOD, "params": {}});
            let _ = queue.send(Some(probe.to_string().into_bytes()));
        }
        if probe_sent && expected.iter().all(|id| answered.contains(id)) {
            break;
        }
        let line = match tokio::time::timeout_at(deadline, reader.next_line()).await {
            Err(_) => {
                return Err(Finding::Hang {
                    waiting: format!("answers to {:?}", missing(&expected, &answered)),
                });
            }
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None) | Err(_)) => {
                return Err(Finding::Ended {
                    unanswered: missing(&expected, &answered),
                });
            }
        };
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            return Err(Finding::NotJson {
                line: line.chars().take(300).collect(),
            });
        };
        match (message.get("method"), message.get("id")) {
            // A request from the agent: refuse it, as a client without that feature would.
            (Some(_), Some(id)) => {
                seen.agent_requests += 1;
                let refusal = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "not supported by the fuzz client"}});
                let _ = queue.send(Some(refusal.to_string().into_bytes()));
            }
            (Some(_), None) => {}
            (None, Some(id)) => {
                seen.answers += 1;
                let key = id_key(id);
                if awaiting.as_ref() == Some(&key) {
                    awaiting = None;
                }
                if let Some(id) = message.pointer("/result/sessionId").and_then(Value::as_str) {
                    seen.sessions += 1;
                    session = id.to_owned();
                }
                answered.insert(key);
            }
            (None, None) => {}
        }
    }
    // Input closed: the agent must close its output, whatever is still running.
    let _ = queue.send(None);
    let _ = writer.await;
    loop {
        match tokio::time::timeout_at(deadline, reader.next_line()).await {
            Err(_) => {
                return Err(Finding::Hang {
                    waiting: "the agent to end after its input closed".into(),
                });
            }
            Ok(Ok(Some(_))) => {}
            Ok(Ok(None) | Err(_)) => return Ok(seen),
        }
    }
}

fn missing(expected: &BTreeSet<String>, answered: &HashSet<String>) -> Vec<String> {
    expected
        .iter()
        .filter(|id| !answered.contains(*id))
        .cloned()
        .collect()
}

fn substitute(line: &[u8], session: &str) -> Vec<u8> {
    const TOKEN: &[u8] = b"$SESSION";
    if !line.windows(TOKEN.len()).any(|window| window == TOKEN) {
        return line.to_vec();
    }
    let mut out = Vec::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.windows(TOKEN.len()).position(|window| window == TOKEN) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(session.as_bytes());
        rest = &rest[at + TOKEN.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// The id a JSON-RPC 2.0 request on this line must be answered under, if the line is one.
pub fn well_formed_request_id(line: &[u8]) -> Option<String> {
    let Value::Object(message) = serde_json::from_slice::<Value>(line).ok()? else {
        return None;
    };
    if message.get("jsonrpc") != Some(&json!("2.0"))
        || !message.get("method").is_some_and(Value::is_string)
        || message.contains_key("result")
        || message.contains_key("error")
        || message
            .get("params")
            .is_some_and(|params| !params.is_object() && !params.is_array())
    {
        return None;
    }
    let id = message.get("id")?;
    let usable = id.is_string() || id.as_i64().is_some();
    usable.then(|| id_key(id))
}

fn id_key(id: &Value) -> String {
    id.to_string()
}

/// A soup of 1 to 12 lines: requests to every ACP method with valid, mutated and hostile
/// parameters, notifications, stray responses, broken JSON and byte noise. `cwd` is an existing
/// absolute directory the agent may open sessions in.
pub fn soup(rng: &mut Rng, cwd: &str) -> Vec<Vec<u8>> {
    let count = 1 + rng.below(12);
    let mut lines = Vec::with_capacity(count + 1);
    // Most soups start the way a client does, so the rest reaches the methods behind it.
    if rng.chance(80) {
        lines.push(request(rng, "initialize", initialize_params()).into_bytes());
    }
    if rng.chance(60) {
        lines.push(request(rng, "session/new", json!({"cwd": cwd, "mcpServers": []})).into_bytes());
    }
    for _ in 0..count {
        lines.push(message(rng, cwd));
    }
    lines
}

fn initialize_params() -> Value {
    json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true}})
}

fn request(rng: &mut Rng, method: &str, params: Value) -> String {
    let id = rng.below(50);
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// The methods of ACP v1 (and a few that do not exist), with parameters a client would send.
fn template(rng: &mut Rng, cwd: &str) -> (String, Value, bool) {
    let session = "$SESSION";
    let (method, params, notification) = match rng.below(17) {
        0 => ("initialize", initialize_params(), false),
        1 => ("session/new", json!({"cwd": cwd, "mcpServers": []}), false),
        2 => (
            "session/load",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
            false,
        ),
        3 => ("session/list", json!({"cwd": cwd}), false),
        4 => (
            "session/resume",
            json!({"sessionId": session, "cwd": cwd}),
            false,
        ),
        5 => ("session/close", json!({"sessionId": session}), false),
        6 => ("session/delete", json!({"sessionId": session}), false),
        7 => (
            "session/fork",
            json!({"sessionId": session, "cwd": cwd}),
            false,
        ),
        8 | 9 => (
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}),
            false,
        ),
        10 => ("session/cancel", json!({"sessionId": session}), true),
        11 => (
            "session/set_mode",
            json!({"sessionId": session, "modeId": *rng.pick(&["ask", "read-only", "yolo", "nonsense"])}),
            false,
        ),
        12 => (
            "session/set_config_option",
            json!({"sessionId": session, "configId": *rng.pick(&["model", "mode", "nonsense"]), "value": "x"}),
            false,
        ),
        13 => (
            "session/set_model",
            json!({"sessionId": session, "modelId": "anthropic/other"}),
            false,
        ),
        14 => ("authenticate", json!({"methodId": "x"}), false),
        15 => ("session/nonsense", json!({}), false),
        _ => ("_keel/unknown", json!({"a": 1}), rng.chance(50)),
    };
    (method.to_owned(), params, notification)
}

/// A hostile JSON value, as text (deep nesting cannot go through `Value` without recursion).
fn hostile_value(rng: &mut Rng) -> String {
    match rng.below(16) {
        0 => "null".into(),
        1 => "true".into(),
        2 => "-1".into(),
        3 => "1.5".into(),
        4 => "18446744073709551616".into(),
        5 => "1e400".into(),
        6 => "\"\"".into(),
        7 => format!("\"{}\"", "a".repeat(1 + rng.below(1 << 20))),
        8 => "[]".into(),
        9 => "{}".into(),
        10 => "[1,\"a\",null,{\"b\":[]}]".into(),
        11 => {
            let depth = *rng.pick(&[64, 200, 100_000]);
            format!("{}{}", "[".repeat(depth), "]".repeat(depth))
        }
        12 => {
            let depth = *rng.pick(&[64, 200, 20_000]);
            format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth))
        }
        13 => "\"\\ud800\\u0000\"".into(),
        14 => "\"../../etc/passwd\"".into(),
        _ => "\"héllo \\n wörld 🦀\"".into(),
    }
}

fn message(rng: &mut Rng, cwd: &str) -> Vec<u8> {
    // Whole-line noise first.
    match rng.below(40) {
        0 => return Vec::new(),
        1 => return b"   \t ".to_vec(),
        2 => return vec![0xff, 0xfe, b'{', 0x00, b'}'],
        3 => return hostile_value(rng).into_bytes(),
        4 => {
            return json!({"jsonrpc": "2.0", "id": rng.below(50), "result": {}})
                .to_string()
                .into_bytes();
        }
        5 => {
            // A batch.
            let (method, params, _) = template(rng, cwd);
            let one = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
            return format!("[{one},{one}]").into_bytes();
        }
        _ => {}
    }
    let (method, mut params, notification) = template(rng, cwd);
    const HOLE: &str = "@@keel-fuzz-hole@@";
    let mut hole = None;
    if rng.chance(45)
        && let Value::Object(fields) = &mut params
    {
        let keys: Vec<String> = fields.keys().cloned().collect();
        match rng.below(3) {
            0 if !keys.is_empty() => {
                let key = rng.pick(&keys).clone();
                fields.insert(key, json!(HOLE));
                hole = Some(hostile_value(rng));
            }
            1 if !keys.is_empty() => {
                let key = rng.pick(&keys).clone();
                fields.remove(&key);
            }
            _ => {
                fields.insert("unexpected".into(), json!(HOLE));
                hole = Some(hostile_value(rng));
            }
        }
    }
    let mut envelope = json!({"jsonrpc": "2.0", "method": method, "params": params});
    if !notification || rng.chance(10) {
        envelope["id"] = json!(rng.below(50));
    }
    if rng.chance(10) {
        match rng.below(5) {
            0 => envelope["id"] = json!(HOLE),
            1 => envelope["jsonrpc"] = json!("1.0"),
            2 => {
                if let Value::Object(fields) = &mut envelope {
                    fields.remove("jsonrpc");
                }
            }
            3 => envelope["params"] = json!(HOLE),
            _ => envelope["method"] = json!(HOLE),
        }
        if hole.is_none() {
            hole = Some(hostile_value(rng));
        }
    }
    let mut text = envelope.to_string();
    if let Some(value) = hole {
        text = text.replacen(&format!("\"{HOLE}\""), &value, 1);
    }
    let mut bytes = text.into_bytes();
    // Byte-level damage.
    match rng.below(12) {
        0 => {
            let cut = rng.below(bytes.len().max(1));
            bytes.truncate(cut);
        }
        1 => {
            let at = rng.below(bytes.len().max(1));
            bytes.insert(at, *rng.pick(&[0x00, 0xc3, 0xff, b'"', b'\\', b'}']));
        }
        2 => {
            let copy = bytes.clone();
            bytes.push(b' ');
            bytes.extend_from_slice(&copy);
        }
        _ => {}
    }
    bytes
}

/// Raw fuzzer bytes as lines: split on newlines, at most `max` lines.
pub fn lines_of(data: &[u8], max: usize) -> Vec<Vec<u8>> {
    data.split(|byte| *byte == b'\n')
        .take(max)
        .map(<[u8]>::to_vec)
        .collect()
}
