//! What a tool run is handed: the runtime surface, the session's state, the abort signal.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::QuestionItem;
use super::ToolError;
use crate::contract::{FileStamp, ProgressSink};
use crate::runtime::Runtime;

/// Per-tool output caps (seed 000's defaults). The head goes to the model; the whole output to a
/// sidecar file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Limits {
    /// `read`: bytes of file text returned per call.
    pub read_bytes: usize,
    /// `glob`: entries returned.
    pub glob_entries: usize,
    /// `grep`: matches returned.
    pub grep_matches: usize,
    /// `bash`: bytes of combined stdout and stderr returned.
    pub bash_bytes: usize,
    /// `web_fetch`: bytes of extracted text returned.
    pub web_fetch_bytes: usize,
    /// Background commands (`bg_start`) a session may have running at once.
    pub background_jobs: usize,
    /// Bytes of a background command's output kept in memory (the sidecar file has all).
    pub background_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            read_bytes: 200 * 1024,
            glob_entries: 1000,
            grep_matches: 200,
            bash_bytes: 200 * 1024,
            web_fetch_bytes: 200 * 1024,
            background_jobs: crate::runtime::jobs::DEFAULT_JOB_LIMIT,
            background_bytes: crate::runtime::jobs::DEFAULT_RING_BYTES,
        }
    }
}

/// The human behind a session, as the `question` tool reaches them. The front-end installs one
/// with [`SessionState::set_asker`] (the turn loop adapts its `TurnHost::ask`); headless sessions
/// leave it unset.
pub trait Asker: Send + Sync {
    /// Asks the questions; one answer list per question, in order. `Err` is the message the
    /// model gets.
    // String error: the refusal (a skip, a decline, the editor's text) is what the model reads.
    fn ask(&self, questions: Vec<QuestionItem>) -> BoxFuture<'_, Result<Vec<Vec<String>>, String>>;
}

/// The session's [`Asker`] slot (a newtype so [`SessionState`] stays `Debug`).
#[derive(Default)]
struct AskerSlot(Mutex<Option<Arc<dyn Asker>>>);

impl std::fmt::Debug for AskerSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = lock(&self.0).is_some();
        f.debug_tuple("AskerSlot")
            .field(&if set { "set" } else { "unset" })
            .finish()
    }
}

/// What the `task` tool asks of its session: a subagent run (a child session on the same engine),
/// and the handles of background runs. The turn loop installs one per turn
/// ([`SessionState::set_subagents`]).
pub trait Subagents: Send + Sync {
    /// Runs a subagent to its final answer, or (background) starts it and returns its handle.
    fn run<'a>(
        &'a self,
        request: SubagentRequest,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<String, ToolError>>;
    /// Waits for a background run's answer.
    fn wait<'a>(
        &'a self,
        handle: &'a str,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<String, ToolError>>;
    /// Stops a background run.
    fn cancel(&self, handle: &str) -> Result<String, ToolError>;
}

/// One subagent run the model asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentRequest {
    /// The agent definition's name; `None` for a general-purpose child with the parent's tools.
    pub agent: Option<String>,
    /// A few words shown to the user.
    pub description: String,
    /// The child's whole task.
    pub prompt: String,
    pub background: bool,
}

/// The session's [`Subagents`] slot.
#[derive(Default)]
struct SubagentsSlot(Mutex<Option<Arc<dyn Subagents>>>);

impl std::fmt::Debug for SubagentsSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = lock(&self.0).is_some();
        f.debug_tuple("SubagentsSlot")
            .field(&if set { "set" } else { "unset" })
            .finish()
    }
}

/// Session-scoped state that tools share. Created by the front-end, one per session.
#[derive(Debug)]
pub struct SessionState {
    pub id: String,
    /// The session's scratch directory: sidecar files live here; removed when the session closes.
    pub scratch_dir: PathBuf,
    pub limits: Limits,
    /// Whether a human can answer (`question`, `ask`); false for `keel exec` and CI.
    pub interactive: bool,
    reads: Mutex<HashMap<PathBuf, FileStamp>>,
    todos: Mutex<Vec<Value>>,
    sidecar_seq: Mutex<u64>,
    asker: AskerSlot,
    subagents: SubagentsSlot,
    /// What each tool keeps for the session, by a type its own module defines
    /// ([`SessionState::private`]): the session holds it without knowing it.
    private: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
    /// Background commands (`bg_*` tools); all stopped when the session closes or is dropped.
    jobs: Arc<crate::runtime::jobs::Jobs>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means another task panicked mid-update of plain data; keep going.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl SessionState {
    pub fn new(
        id: impl Into<String>,
        scratch_dir: PathBuf,
        limits: Limits,
        interactive: bool,
    ) -> Self {
        let jobs = crate::runtime::jobs::Jobs::new(limits.background_jobs, limits.background_bytes);
        Self {
            id: id.into(),
            scratch_dir,
            limits,
            interactive,
            reads: Mutex::new(HashMap::new()),
            todos: Mutex::new(Vec::new()),
            sidecar_seq: Mutex::new(0),
            asker: AskerSlot::default(),
            subagents: SubagentsSlot::default(),
            private: Mutex::new(HashMap::new()),
            jobs,
        }
    }

    /// The session's background commands.
    pub fn jobs(&self) -> &Arc<crate::runtime::jobs::Jobs> {
        &self.jobs
    }

    /// The session's `T`, made with `T::default()` the first time it is asked for: state one
    /// tool keeps for the session (the `skill` tool's skills, `tool_search`'s index), defined
    /// in that tool's module.
    pub fn private<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let slot = lock(&self.private)
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::default()))
            .clone();
        // The slot of `T`'s id holds a `T`: it was made just above, or by an earlier call.
        slot.downcast::<T>()
            .unwrap_or_else(|_| Arc::new(T::default()))
    }

    /// Records that the session read `path` (canonical) as it was at `stamp`.
    pub fn record_read(&self, path: &Path, stamp: FileStamp) {
        lock(&self.reads).insert(path.to_path_buf(), stamp);
    }

    /// What the session last read of `path`, if anything.
    pub fn last_read(&self, path: &Path) -> Option<FileStamp> {
        lock(&self.reads).get(path).cloned()
    }

    /// Forgets what the conversation knew (`/clear`): the files read (so an edit needs a fresh
    /// read) and the todo list.
    pub fn forget_conversation(&self) {
        lock(&self.reads).clear();
        lock(&self.todos).clear();
    }

    pub fn todos(&self) -> Vec<Value> {
        lock(&self.todos).clone()
    }

    pub fn set_todos(&self, todos: Vec<Value>) {
        *lock(&self.todos) = todos;
    }

    /// Installs (or, with `None`, removes) the human the `question` tool asks. Only consulted
    /// when [`SessionState::interactive`] is true.
    pub fn set_asker(&self, asker: Option<Arc<dyn Asker>>) {
        *lock(&self.asker.0) = asker;
    }

    /// The installed [`Asker`], if any.
    pub fn asker(&self) -> Option<Arc<dyn Asker>> {
        lock(&self.asker.0).clone()
    }

    /// Installs (or removes) what the `task` tool runs subagents with.
    pub fn set_subagents(&self, subagents: Option<Arc<dyn Subagents>>) {
        *lock(&self.subagents.0) = subagents;
    }

    /// The installed [`Subagents`], if any.
    pub fn subagents(&self) -> Option<Arc<dyn Subagents>> {
        lock(&self.subagents.0).clone()
    }

    /// A fresh sidecar file name under the scratch directory.
    pub fn next_sidecar(&self, tool: &str) -> PathBuf {
        let mut seq = lock(&self.sidecar_seq);
        *seq += 1;
        self.scratch_dir
            .join(format!("{tool}-output-{:04}.txt", *seq))
    }
}

/// The context of one tool call.
#[derive(Debug, Clone)]
pub struct ToolContext {
    pub runtime: Runtime,
    pub session: Arc<SessionState>,
    pub call_id: String,
    /// Fires when the session aborts the turn. Tools stop and return [`ToolError::Cancelled`].
    pub cancel: CancellationToken,
    pub progress: ProgressSink,
}

impl ToolContext {
    /// Writes the whole output of a call to a fresh sidecar file (through the runtime) and
    /// returns its path.
    pub async fn spill(&self, tool: &str, full: &[u8]) -> Result<PathBuf, ToolError> {
        let path = self.session.next_sidecar(tool);
        self.runtime.write_scratch(&path, full).await?;
        Ok(path)
    }

    /// Caps `text` at `limit` bytes (on a char boundary, preferring a line end). Past the cap
    /// the whole text is spilled; returns the head and the sidecar path.
    pub async fn cap_bytes(
        &self,
        tool: &str,
        text: String,
        limit: usize,
    ) -> Result<(String, Option<PathBuf>), ToolError> {
        if text.len() <= limit {
            return Ok((text, None));
        }
        let path = self.spill(tool, text.as_bytes()).await?;
        Ok((head_of(&text, limit).to_owned(), Some(path)))
    }

    /// Caps a list of entries at `limit`; past it, the whole list is spilled, one per line.
    pub async fn cap_entries(
        &self,
        tool: &str,
        mut entries: Vec<String>,
        limit: usize,
    ) -> Result<(Vec<String>, Option<PathBuf>), ToolError> {
        if entries.len() <= limit {
            return Ok((entries, None));
        }
        let path = self.spill(tool, entries.join("\n").as_bytes()).await?;
        entries.truncate(limit);
        Ok((entries, Some(path)))
    }
}

/// The longest prefix of `text` of at most `limit` bytes, cut at a line end when one is in the
/// last quarter, otherwise at a char boundary.
pub fn head_of(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    let head = &text[..end];
    match head.rfind('\n') {
        Some(nl) if nl + 1 >= end - end / 4 => &head[..=nl],
        _ => head,
    }
}

#[cfg(test)]
mod tests {
    use super::head_of;

    #[test]
    fn head_cuts_on_char_boundary_and_prefers_line_end() {
        assert_eq!(head_of("abc", 10), "abc");
        assert_eq!(head_of("aaaa\nbbbb", 7), "aaaa\nbb");
        assert_eq!(head_of("aaaaaa\nbb", 8), "aaaaaa\n");
        assert_eq!(head_of("é", 1), "");
    }
}
