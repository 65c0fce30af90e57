//! The contract every layer shares, depending on nothing else in keel-core: what a tool is
//! ([`ToolKind`], [`Subject`], [`Origin`]), what one call acts on ([`CallTarget`]), what a
//! running call reports ([`ToolProgress`] through a [`ProgressSink`]), what a read saw
//! ([`FileStamp`]), how a call or an access fails ([`ToolError`], with a [`Refusal`] of the
//! capability check) and a failure of Keel itself ([`InternalError`]). The runtime, the tools,
//! the policy and the turn loop all use these; [`crate::tool`] re-exports them, the runtime
//! names the error [`AccessError`](crate::runtime::AccessError).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

/// The kind hint a front-end uses to draw a call (mirrors ACP's `ToolKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    Read,
    Edit,
    Delete,
    Move,
    Search,
    Execute,
    Think,
    Fetch,
    SwitchMode,
    Other,
}

impl ToolKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Read => "read",
            ToolKind::Edit => "edit",
            ToolKind::Delete => "delete",
            ToolKind::Move => "move",
            ToolKind::Search => "search",
            ToolKind::Execute => "execute",
            ToolKind::Think => "think",
            ToolKind::Fetch => "fetch",
            ToolKind::SwitchMode => "switch_mode",
            ToolKind::Other => "other",
        }
    }
}

/// Which argument names the thing a call acts on: the permission engine matches rules against it
/// and derives approval keys from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type", content = "field")]
pub enum Subject {
    /// The call has no subject (todo, question).
    None,
    /// A file path argument (absolute or workspace-relative). `None` field means "the workspace".
    Path(Option<String>),
    /// A shell command line argument.
    Command(String),
    /// A URL argument; the subject is its host.
    Url(String),
    /// A free-text query (web_search); the subject is the configured search host.
    Query(String),
    /// Files named inside the arguments (a patch's files): the tool lists them when it parses a
    /// call ([`ParsedCall::paths`](crate::tool::ParsedCall::paths)); each is checked and
    /// decided like the subject of a write,
    /// and the call's decision is the strictest of theirs.
    Paths,
}

/// What one call acts on, read once by its tool from its typed arguments
/// ([`Tool::target`](crate::tool::Tool::target)):
/// the permission engine decides on it, and nothing reads the call's JSON arguments again.
/// Its shape follows the spec's [`Subject`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CallTarget {
    /// Nothing beyond the tool itself (todo, question), or a path argument left out (the
    /// workspace).
    #[default]
    None,
    /// A file or directory, as the arguments wrote it.
    Path(String),
    /// A shell command line.
    Command(CommandTarget),
    /// A URL (the subject is its host).
    Url(String),
    /// A free-text query (the subject is the search host).
    Query(String),
}

/// A shell call's target: what runs, where it starts, and whether it asks to run outside the
/// kernel sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandTarget {
    pub line: String,
    /// The directory it starts in, as written (`None`: the workspace).
    pub cwd: Option<String>,
    pub unsandboxed: bool,
}

impl CallTarget {
    /// A command line run in the workspace, confined.
    pub fn command(line: &str) -> Self {
        CallTarget::Command(CommandTarget {
            line: line.to_owned(),
            cwd: None,
            unsandboxed: false,
        })
    }

    /// The path, for a [`CallTarget::Path`].
    pub fn path(&self) -> Option<&str> {
        match self {
            CallTarget::Path(path) => Some(path),
            _ => None,
        }
    }

    /// The target of a tool whose arguments stay JSON (MCP and extension tools): the argument
    /// its spec's [`Subject`] names, when it is a string.
    pub fn from_json(subject: &Subject, args: &Value) -> Self {
        let named = |field: &str| args.get(field).and_then(Value::as_str).map(str::to_owned);
        let target = match subject {
            Subject::Path(Some(field)) => named(field).map(CallTarget::Path),
            Subject::Command(field) => named(field).map(|line| CallTarget::command(&line)),
            Subject::Url(field) => named(field).map(CallTarget::Url),
            Subject::Query(field) => named(field).map(CallTarget::Query),
            Subject::Path(None) | Subject::None | Subject::Paths => None,
        };
        target.unwrap_or_default()
    }
}

/// Where a tool comes from (reported by `/tools` and `keel tools`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "layer", content = "name")]
pub enum Origin {
    Bundled,
    Global,
    Project,
    Mcp(String),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Bundled => f.write_str("bundled"),
            Origin::Global => f.write_str("global"),
            Origin::Project => f.write_str("project"),
            Origin::Mcp(server) => write!(f, "mcp:{server}"),
        }
    }
}

/// What `read` saw of a file: the read-before-write guard compares it with the disk at edit time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStamp {
    pub modified: Option<SystemTime>,
    pub len: u64,
}

/// Progress a running tool reports (streamed output for the front-end; the model sees only the
/// final envelope).
#[derive(Debug, Clone, PartialEq)]
pub enum ToolProgress {
    /// A chunk of output, as it came.
    Output(String),
    /// The host created a terminal for this call.
    Terminal(String),
}

/// Where progress goes. Cloneable; sending never blocks; a closed sink drops silently.
///
/// A sink made with [`ProgressSink::bounded`] drops output chunks while more than its budget of
/// output bytes is waiting to be taken ([`ProgressBudget::taken`]): live output is a view (the
/// result carries the output, and the sidecar all of it), and a front-end that cannot keep up
/// must not make the queue grow without bound. Other progress is never dropped.
#[derive(Debug, Clone, Default)]
pub struct ProgressSink {
    sender: Option<mpsc::UnboundedSender<ToolProgress>>,
    budget: Option<Arc<ProgressBudget>>,
}

/// The output bytes a [`ProgressSink`] has queued and not yet seen taken.
#[derive(Debug)]
pub struct ProgressBudget {
    queued: std::sync::atomic::AtomicUsize,
    limit: usize,
}

impl ProgressBudget {
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            queued: std::sync::atomic::AtomicUsize::new(0),
            limit,
        })
    }

    /// The receiver took `progress` off the queue.
    pub fn taken(&self, progress: &ToolProgress) {
        if let ToolProgress::Output(text) = progress {
            let _ = self.queued.fetch_update(
                std::sync::atomic::Ordering::AcqRel,
                std::sync::atomic::Ordering::Acquire,
                |queued| Some(queued.saturating_sub(text.len())),
            );
        }
    }
}

impl ProgressSink {
    pub fn new(sender: mpsc::UnboundedSender<ToolProgress>) -> Self {
        Self {
            sender: Some(sender),
            budget: None,
        }
    }

    /// A sink that drops output chunks past `budget` (see the type's documentation).
    pub fn bounded(
        sender: mpsc::UnboundedSender<ToolProgress>,
        budget: Arc<ProgressBudget>,
    ) -> Self {
        Self {
            sender: Some(sender),
            budget: Some(budget),
        }
    }

    pub fn send(&self, progress: ToolProgress) {
        let Some(sender) = &self.sender else { return };
        if let (Some(budget), ToolProgress::Output(text)) = (&self.budget, &progress) {
            let queued = budget
                .queued
                .fetch_add(text.len(), std::sync::atomic::Ordering::AcqRel);
            if queued >= budget.limit {
                budget
                    .queued
                    .fetch_sub(text.len(), std::sync::atomic::Ordering::AcqRel);
                return;
            }
        }
        let _ = sender.send(progress);
    }
}

/// A source error kept behind a failure (cheap to clone, so a [`ToolError`] stays `Clone`).
pub type ErrorSource = std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>;

/// A failure of Keel itself: what it was doing and the error, kept whole for the log and the
/// user.
#[derive(Debug, Clone, thiserror::Error)]
#[error("internal error in Keel while {context}")]
pub struct InternalError {
    /// What Keel was doing, as a phrase ("writing the sidecar file"); no paths.
    pub context: &'static str,
    #[source]
    pub source: ErrorSource,
}

impl InternalError {
    /// A failure of Keel itself while doing `context` (a short phrase, no paths).
    pub fn new(
        context: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            context,
            source: Arc::new(source),
        }
    }

    /// A broken invariant while doing `context`.
    pub fn invariant(context: &'static str, what: impl Into<String>) -> Self {
        Self::new(context, Invariant(what.into()))
    }

    /// What the model reads instead of the details.
    pub const FOR_MODEL: &'static str = "internal error in Keel; the user has been shown the \
        details. This is not caused by your call's arguments; do not retry it as is.";

    /// The whole story for the user and the log: the context, then each source, `: `-joined.
    pub fn report(&self) -> String {
        let mut text = self.to_string();
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(self.source.as_ref());
        while let Some(error) = next {
            text.push_str(": ");
            text.push_str(&error.to_string());
            next = error.source();
        }
        text
    }
}

impl PartialEq for InternalError {
    fn eq(&self, other: &Self) -> bool {
        self.report() == other.report()
    }
}

/// A broken invariant, as a source error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Invariant(String);

/// A refusal by the capability check, with the reason the model sees
/// ([`crate::capability::Scope`] makes them; `capability` re-exports it).
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{reason}")]
pub struct Refusal {
    pub capability: &'static str,
    pub subject: String,
    pub reason: String,
}

/// A failed call or access, by audience: what a tool returns, and what the runtime's accesses
/// fail with (as [`AccessError`](crate::runtime::AccessError)), so a tool's `?` passes the
/// runtime's error on as it is.
///
/// Every variant but [`ToolError::Internal`] is for the model: its `Display` is the envelope's
/// `error_text`, a message the model can act on (fix an argument, read the file again, pick
/// another path, ask the user). [`ToolError::Internal`] is a failure of Keel itself (its own
/// state on the disk, a task that panicked, a broken invariant): the turn loop logs it with its
/// source chain, shows it to the user, and the model reads only a short neutral message.
/// None aborts the turn.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not match the schema (or do not deserialize).
    #[error("invalid arguments for `{tool}`: {message}")]
    InvalidArguments { tool: String, message: String },
    /// Arguments that parse but ask for what cannot be done (a bad regex or glob, a range past
    /// the end, a NUL byte in a path, a directory where a file is needed, contradicting fields, a
    /// URL that does not parse).
    #[error("{0}")]
    BadArgument(String),
    /// What the call names is not there (a file, the text to replace, a handle, a skill, a
    /// background command).
    #[error("{0}")]
    NotFound(String),
    /// The file is not what the model last saw (changed since it was read, or while the call
    /// ran): read it again.
    #[error("{0}")]
    Stale(String),
    /// The capability check refused an access.
    #[error("{0}")]
    Refused(Refusal),
    /// The permission engine or the user denied the call, or the access waits for the user's
    /// word (a hard-linked file).
    #[error("{0}")]
    Denied(String),
    /// This session cannot do it (no workspace, no terminal, no key configured, headless, no
    /// sandbox helper where one is required).
    #[error("{0}")]
    Unavailable(String),
    /// The operating system refused or failed an operation on the model's subject (a file of the
    /// workspace, a command to start); the message names the subject, the source is the OS error.
    #[error("{message}")]
    Io {
        message: String,
        #[source]
        source: Option<ErrorSource>,
    },
    /// Something the call reached outside Keel failed: a web server, an MCP server, the editor,
    /// a subagent's model.
    #[error("{message}")]
    External {
        message: String,
        #[source]
        source: Option<ErrorSource>,
    },
    /// The tool or the access outlived its timeout.
    #[error("timed out after {}s", .0.as_secs_f32())]
    Timeout(Duration),
    /// The session aborted the call.
    #[error("cancelled by the user")]
    Cancelled,
    /// A failure of Keel itself: for the user and the log, never for the model.
    #[error("{}", InternalError::FOR_MODEL)]
    Internal(InternalError),
}

impl ToolError {
    /// An OS failure on the model's subject, the OS error kept as the source.
    pub fn io(message: impl Into<String>, source: std::io::Error) -> Self {
        ToolError::Io {
            message: message.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// An outside failure with no source error (an HTTP status, a server's own message).
    pub fn external(message: impl Into<String>) -> Self {
        ToolError::External {
            message: message.into(),
            source: None,
        }
    }

    /// An outside failure with the error that caused it.
    pub fn external_from(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        ToolError::External {
            message: message.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// A failure of Keel itself while doing `context` (a short phrase, no paths).
    pub fn internal(
        context: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        ToolError::Internal(InternalError::new(context, source))
    }

    /// A broken invariant of Keel (no source error: the message says what did not hold).
    pub fn invariant(context: &'static str, what: impl Into<String>) -> Self {
        ToolError::Internal(InternalError::invariant(context, what))
    }
}

/// Two errors are equal when they are the same variant saying the same thing (sources compare by
/// their text).
impl PartialEq for ToolError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ToolError::Internal(a), ToolError::Internal(b)) => a == b,
            _ => {
                std::mem::discriminant(self) == std::mem::discriminant(other)
                    && self.to_string() == other.to_string()
            }
        }
    }
}

impl From<Refusal> for ToolError {
    fn from(refusal: Refusal) -> Self {
        ToolError::Refused(refusal)
    }
}

impl From<InternalError> for ToolError {
    fn from(error: InternalError) -> Self {
        ToolError::Internal(error)
    }
}
