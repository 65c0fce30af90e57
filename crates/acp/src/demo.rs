//! `keel demo`: what Keel does in an editor, offline, in one terminal.
//!
//! [`run`] copies the bundled sample project (embedded in the binary) into a scratch directory,
//! starts `keel acp` as a child process on the scripted demo model (`KEEL_MODEL=scripted/demo`,
//! `KEEL_SCRIPT`), and drives it over stdio as an editor would: initialize, a new session in the
//! sample project, one prompt. The [`Transcript`] prints what the editor would show: the agent's
//! text, each tool call with its kind and title, permission prompts with the diff drawn by
//! keel-diff (answered by the user on a terminal, automatically otherwise), command output, the
//! plan and the stop reason. At the end the child is reaped and the scratch directory removed.

use std::collections::{HashMap, HashSet};
use std::io::{IsTerminal as _, Write as _};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, NewSessionRequest, PermissionOptionKind, PlanEntryStatus,
    PromptRequest, RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionNotification, SessionUpdate, StopReason, TextContent,
    ToolCallContent, ToolCallStatus,
};
use agent_client_protocol::{Agent, ByteStreams, Client};
use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};

use crate::cli::style::Style;
use crate::cli::{DemoArgs, EXIT_OK, Failure, Outcome};
use crate::server::Roots;

/// The sample project, embedded so the installed binary works from any directory.
const SAMPLE_PROJECT: &[(&str, &str)] = &[
    (
        "README.md",
        include_str!("../../../fixtures/sample-project/README.md"),
    ),
    (
        "greet.py",
        include_str!("../../../fixtures/sample-project/greet.py"),
    ),
    (
        "test.sh",
        include_str!("../../../fixtures/sample-project/test.sh"),
    ),
];

/// The scripted model's responses.
const SCRIPT: &str = include_str!("../../../fixtures/scripted/demo.json");

/// What the demo asks.
pub const PROMPT: &str = "The greeting in greet.py is misspelt. Fix it, then run the tests.";

/// How long the child may take to exit after its stdin closes before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// Runs the demo.
pub async fn run(args: DemoArgs) -> Outcome {
    let interactive =
        !args.yes && std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let style = Style::for_stream(std::io::stdout().is_terminal());
    let scratch = keel_core::runtime::scratch::temp_dir("keel-demo-")
        .map_err(|e| Failure::failed(format!("cannot create a scratch directory: {e}")))?;
    let scratch_path = scratch.path().to_path_buf();
    let workspace = scratch_path.join("sample-project");
    lay_out(&scratch_path, &workspace)?;
    // The agent sees the workspace through its canonical path (a temp dir may be a symlink).
    let shown_root = std::path::absolute(&workspace).unwrap_or_else(|_| workspace.clone());
    let transcript = Arc::new(Transcript::new(style, interactive, &shown_root));
    transcript.line(&format!(
        "{} a scratch copy of the sample project in {}",
        style.bold("keel demo:"),
        workspace.display()
    ));
    transcript.line(&style.dim(
        "the model is scripted: no API key and no network; the agent is `keel acp`, driven over stdio as an editor would",
    ));
    if !interactive {
        transcript.line(
            &style.dim("not a terminal (or --yes): permission prompts are answered automatically"),
        );
    }

    let mut child = spawn_agent(&scratch_path, &workspace)?;
    // Ctrl-C ends the session but not the clean-up below.
    let driven = tokio::select! {
        driven = drive(&mut child, &workspace, transcript.clone()) => driven,
        _ = tokio::signal::ctrl_c() => Err(Failure::failed("interrupted")),
    };
    let reaped = reap(child).await;
    let removed = scratch.close();

    let stop = driven?;
    reaped?;
    removed.map_err(|e| {
        Failure::failed(format!(
            "cannot remove the scratch directory {}: {e}",
            scratch_path.display()
        ))
    })?;
    transcript.line(&format!(
        "\n{} {}",
        style.bold("stop reason:"),
        stop_reason_name(stop)
    ));
    transcript.line(&style.dim(&format!(
        "the agent exited; scratch directory {} removed",
        scratch_path.display()
    )));
    Ok(EXIT_OK)
}

/// Writes the sample project, the script and an empty user configuration into `scratch`
/// (through the runtime's writer of Keel's own files: the host lays these out, no tool does).
fn lay_out(scratch: &Path, workspace: &Path) -> Result<(), Failure> {
    let write = |path: &Path, text: &str| {
        keel_core::runtime::config_files::write_atomically(path, text)
            .map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))
    };
    for (name, text) in SAMPLE_PROJECT {
        write(&workspace.join(name), text)?;
    }
    // The user configuration sits in a directory of its own: the engine protects that
    // directory (Keel's configuration) from every tool.
    let config_dir = scratch.join("config");
    write(&scratch.join("demo.json"), SCRIPT)?;
    write(&config_dir.join("config.toml"), "")?;
    Ok(())
}

/// Starts `keel acp` on the scripted model, isolated from the user's configuration, logging
/// into the scratch directory.
#[expect(
    clippy::disallowed_methods,
    reason = "the demo starts its own `keel acp` child, as an editor does"
)]
fn spawn_agent(scratch: &Path, workspace: &Path) -> Result<tokio::process::Child, Failure> {
    let exe = std::env::current_exe()
        .map_err(|e| Failure::failed(format!("cannot find the keel binary: {e}")))?;
    tokio::process::Command::new(exe)
        .arg("--log-file")
        .arg(scratch.join("keel.log"))
        .arg("acp")
        .current_dir(workspace)
        .env("KEEL_CONFIG", scratch.join("config").join("config.toml"))
        .env("KEEL_MODEL", "scripted/demo")
        .env("KEEL_SCRIPT", scratch.join("demo.json"))
        .env("KEEL_MODE", "allowlist")
        // The demo's session and trust records stay in the scratch directory, out of the
        // user's history.
        .env("XDG_DATA_HOME", scratch.join("data"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Failure::failed(format!("cannot start `keel acp`: {e}")))
}

/// The editor's side of the session: initialize, a session in the workspace, one prompt.
async fn drive(
    child: &mut tokio::process::Child,
    workspace: &Path,
    transcript: Arc<Transcript>,
) -> Result<StopReason, Failure> {
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(Failure::failed("the agent's stdio is not connected"));
    };
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
    let on_update = transcript.clone();
    let on_permission = transcript.clone();
    let workspace = workspace.to_path_buf();
    let result = Client
        .v1()
        .name("keel-demo")
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                on_update.update(notification.update);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx| {
                let outcome = on_permission.permission(&request).await;
                responder.respond(RequestPermissionResponse::new(outcome))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async move |agent: ConnectionTo<Agent>| {
            agent
                .send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let session = agent
                .send_request(NewSessionRequest::new(workspace.clone()))
                .block_task()
                .await?;
            transcript.line(&format!("\n{} {PROMPT}", transcript.style.bold("you:")));
            let response = agent
                .send_request(PromptRequest::new(
                    session.session_id,
                    vec![ContentBlock::Text(TextContent::new(PROMPT))],
                ))
                .block_task()
                .await?;
            transcript.end_text();
            Ok(response.stop_reason)
        })
        .await;
    result.map_err(|e| Failure::failed(format!("the ACP session failed: {e}")))
}

/// Waits for the child to exit after its stdin closed; kills it if it does not.
async fn reap(mut child: tokio::process::Child) -> Result<(), Failure> {
    drop(child.stdin.take());
    match tokio::time::timeout(EXIT_GRACE, child.wait()).await {
        Ok(Ok(status)) if status.success() => Ok(()),
        Ok(Ok(status)) => Err(Failure::failed(format!("`keel acp` exited with {status}"))),
        Ok(Err(e)) => Err(Failure::failed(format!("cannot wait for `keel acp`: {e}"))),
        Err(_) => {
            let _ = child.kill().await;
            Err(Failure::failed(format!(
                "`keel acp` did not exit within {}s of the end of the session; killed it",
                EXIT_GRACE.as_secs()
            )))
        }
    }
}

fn stop_reason_name(stop: StopReason) -> String {
    serde_json::to_value(stop)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{stop:?}"))
}

/// What the terminal shows: the editor's view of the session.
#[derive(Debug)]
pub struct Transcript {
    style: Style,
    interactive: bool,
    /// Whether the last thing written was agent text without a final newline.
    in_text: Mutex<bool>,
    /// Titles of the calls seen, by id, for their updates.
    titles: Mutex<Vec<(String, String)>>,
    /// Content drawn so far, by call.
    shown: Mutex<HashSet<String>>,
    /// The last text content of each call.
    streamed: Mutex<HashMap<String, String>>,
    /// The todo calls: their card repeats the plan, which is drawn once, as the plan.
    plan_calls: Mutex<HashSet<String>>,
    /// The sample project, for showing paths relative to it.
    roots: Roots,
}

impl Transcript {
    fn new(style: Style, interactive: bool, workspace: &Path) -> Self {
        Self {
            style,
            interactive,
            in_text: Mutex::new(false),
            titles: Mutex::new(Vec::new()),
            shown: Mutex::new(HashSet::new()),
            streamed: Mutex::new(HashMap::new()),
            plan_calls: Mutex::new(HashSet::new()),
            roots: Roots(vec![workspace.to_path_buf()]),
        }
    }

    fn write(&self, text: &str) {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
    }

    /// Ends a run of streamed agent text with a newline.
    fn end_text(&self) {
        let mut in_text = self.in_text.lock().unwrap_or_else(|e| e.into_inner());
        if *in_text {
            self.write("\n");
            *in_text = false;
        }
    }

    fn line(&self, text: &str) {
        self.end_text();
        self.write(&format!("{text}\n"));
    }

    fn title_of(&self, id: &str) -> String {
        self.titles
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(call, _)| call == id)
            .map(|(_, title)| title.clone())
            .unwrap_or_else(|| id.to_owned())
    }

    fn update(&self, update: SessionUpdate) {
        match update {
            SessionUpdate::AgentMessageChunk(chunk) => {
                if let ContentBlock::Text(text) = chunk.content {
                    let mut in_text = self.in_text.lock().unwrap_or_else(|e| e.into_inner());
                    if !*in_text {
                        self.write(&format!("\n{} ", self.style.bold("agent:")));
                        *in_text = true;
                    }
                    self.write(&text.text);
                }
            }
            SessionUpdate::ToolCall(call) => {
                if call.name.as_deref() == Some(keel_core::tools::todo::ID) {
                    self.plan_calls
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(call.tool_call_id.to_string());
                }
                self.titles
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((call.tool_call_id.to_string(), call.title.clone()));
                self.line(&format!(
                    "\n{} {} {}",
                    self.style.cyan("●"),
                    self.style.bold(&call.title),
                    self.style.dim(&format!("[{}]", kind_name(&call.kind)))
                ));
                self.show_content(&call.tool_call_id.to_string(), &call.content);
            }
            SessionUpdate::ToolCallUpdate(update) => {
                let id = update.tool_call_id.to_string();
                let plan = self
                    .plan_calls
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .contains(&id);
                if let Some(content) = update.fields.content.as_ref().filter(|_| !plan) {
                    self.show_content(&id, content);
                }
                match update.fields.status {
                    Some(ToolCallStatus::Completed) => self.line(&format!(
                        "  {} {}",
                        self.style.green("✓"),
                        self.title_of(&update.tool_call_id.to_string())
                    )),
                    Some(ToolCallStatus::Failed) => self.line(&format!(
                        "  {} {}",
                        self.style.red("✗"),
                        self.title_of(&update.tool_call_id.to_string())
                    )),
                    _ => {}
                }
            }
            SessionUpdate::Plan(plan) => {
                let mut text = format!("\n{}", self.style.bold("plan:"));
                for entry in &plan.entries {
                    let mark = match entry.status {
                        PlanEntryStatus::Completed => "[x]",
                        PlanEntryStatus::InProgress => "[~]",
                        _ => "[ ]",
                    };
                    text.push_str(&format!("\n  {mark} {}", entry.content));
                }
                self.line(&text);
            }
            other => tracing::debug!(update = ?other, "demo: update not shown"),
        }
    }

    /// Tool output as the editor would draw it: diffs through keel-diff, text indented.
    /// Content already drawn for a call (an update repeats the diff the prompt showed) is not
    /// drawn again.
    fn show_content(&self, call_id: &str, content: &[ToolCallContent]) {
        for item in content {
            let drawn = match item {
                ToolCallContent::Diff(diff) => {
                    let path = self.roots.display(&diff.path.display().to_string());
                    let drawn = self
                        .style
                        .diff(&path, diff.old_text.as_deref(), &diff.new_text);
                    drawn
                        .lines()
                        .map(|l| format!("  {l}\n"))
                        .collect::<String>()
                }
                ToolCallContent::Content(content) => match &content.content {
                    ContentBlock::Text(text) => {
                        // Streamed output grows: draw only what is new since the last update.
                        let mut streamed = self.streamed.lock().unwrap_or_else(|e| e.into_inner());
                        let now = unfenced(&text.text);
                        let before = streamed.insert(call_id.to_owned(), now.clone());
                        let new = match before {
                            Some(before) if now == before => continue,
                            Some(before) if now.starts_with(&before) => {
                                now[before.len()..].to_owned()
                            }
                            _ => now,
                        };
                        text_block(&new, &self.style)
                    }
                    _ => continue,
                },
                _ => continue,
            };
            let key = format!("{call_id}\u{0}{drawn}");
            {
                let mut shown = self.shown.lock().unwrap_or_else(|e| e.into_inner());
                if shown.contains(&key) {
                    continue;
                }
                shown.insert(key);
            }
            self.line(drawn.trim_end());
        }
    }

    /// Shows a permission prompt and answers it (the user on a terminal; automatically
    /// otherwise, allowing once).
    async fn permission(&self, request: &RequestPermissionRequest) -> RequestPermissionOutcome {
        let fields = &request.tool_call.fields;
        let title = fields
            .title
            .clone()
            .unwrap_or_else(|| self.title_of(&request.tool_call.tool_call_id.to_string()));
        self.line(&format!(
            "\n{} {} {}",
            self.style.bold("permission:"),
            title,
            self.style.dim(
                &fields
                    .kind
                    .as_ref()
                    .map(kind_name)
                    .map(|k| format!("[{k}]"))
                    .unwrap_or_default()
            )
        ));
        if let Some(content) = &fields.content {
            self.show_content(&request.tool_call.tool_call_id.to_string(), content);
        }
        let choices: Vec<String> = request
            .options
            .iter()
            .map(|o| format!("{} ({})", o.name, option_kind_name(o.kind)))
            .collect();
        self.line(
            &self
                .style
                .dim(&format!("  options: {}", choices.join(", "))),
        );
        let wanted = if self.interactive {
            self.ask_user().await
        } else {
            self.line(&format!(
                "  {} not a terminal: answering \"allow once\" automatically",
                self.style.cyan("→")
            ));
            Some(PermissionOptionKind::AllowOnce)
        };
        let chosen = wanted.and_then(|kind| {
            request.options.iter().find(|o| o.kind == kind).or_else(|| {
                // No exact match: fall back to the same direction (allow / reject).
                let allow = matches!(
                    kind,
                    PermissionOptionKind::AllowOnce | PermissionOptionKind::AllowAlways
                );
                request.options.iter().find(|o| {
                    allow
                        == matches!(
                            o.kind,
                            PermissionOptionKind::AllowOnce | PermissionOptionKind::AllowAlways
                        )
                })
            })
        });
        match chosen {
            Some(option) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                option.option_id.clone(),
            )),
            None => RequestPermissionOutcome::Cancelled,
        }
    }

    /// Reads y / n / a from the terminal.
    async fn ask_user(&self) -> Option<PermissionOptionKind> {
        loop {
            self.end_text();
            self.write(&format!(
                "  {} ",
                self.style.bold("allow? [y]es once / [n]o / [a]lways:")
            ));
            let line = tokio::task::spawn_blocking(|| {
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).map(|_| line)
            })
            .await
            .ok()?
            .ok()?;
            match line.trim().to_lowercase().as_str() {
                "y" | "yes" => return Some(PermissionOptionKind::AllowOnce),
                "a" | "always" => return Some(PermissionOptionKind::AllowAlways),
                "n" | "no" => return Some(PermissionOptionKind::RejectOnce),
                "" if line.is_empty() => return None, // end of input
                _ => {}
            }
        }
    }
}

/// Lines shown of a text block (a file read, command output); the rest is counted.
const TEXT_LINES: usize = 12;

/// `text` without its markdown fence lines (a terminal shows the content plainly).
fn unfenced(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("```"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// A text block of tool output, dimmed, in a gutter, cut at [`TEXT_LINES`].
fn text_block(text: &str, style: &Style) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out: String = lines
        .iter()
        .take(TEXT_LINES)
        .map(|l| format!("  {} {}\n", style.dim("│"), style.dim(l)))
        .collect();
    if lines.len() > TEXT_LINES {
        out.push_str(&format!(
            "  {} {}\n",
            style.dim("│"),
            style.dim(&format!("… {} more lines", lines.len() - TEXT_LINES))
        ));
    }
    out
}

fn kind_name<T: serde::Serialize + std::fmt::Debug>(kind: &T) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{kind:?}"))
}

fn option_kind_name(kind: PermissionOptionKind) -> String {
    kind_name(&kind)
}
