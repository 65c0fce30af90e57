//! The session store: every conversation kept on disk, so an editor restart (or a crash) loses
//! nothing.
//!
//! Principal types:
//! - [`SessionStore`]: the directory `{user-data}/sessions/`, one subdirectory per session
//!   holding `meta.json` (cwd, extra roots, title, creation time: the small index that makes
//!   listing cheap; the last update is the log's modification time) and `events.jsonl` (the
//!   append-only [`StoredEvent`] log).
//! - [`SessionLog`]: an open session's log, held under an exclusive `flock`: a second opener, in
//!   this process or another, gets [`StoreError::Locked`]. Every event is one `write` of one line
//!   as it happens, so `kill -9` loses at most the event in flight; a torn last line is dropped
//!   (and cut from the file) when the log is opened again.
//!
//! Session ids come from clients: only `[A-Za-z0-9_-]` (at most 128) is accepted, so an id can
//! never name a path outside the store. All file access goes through
//! [`crate::runtime::store_files`].

mod event;
mod recorded;
mod transcript;

pub use event::{StoredEvent, model_history};
pub use recorded::{ApprovalAnswer, CallStatus, TurnStop, UserContent};
pub use transcript::markdown;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::runtime::config_files;
use crate::runtime::store_files::{self, LockedLog, OpenLogError};

const META_FILE: &str = "meta.json";
const LOG_FILE: &str = "events.jsonl";
/// The longest title kept (characters).
const TITLE_CHARS: usize = 80;

/// Why the store could not do what was asked. The front-end reports each to the user as is.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("`{0}` is not a valid session id (letters, digits, `-` and `_` only)")]
    InvalidId(String),
    #[error("no session `{0}` in the session store")]
    NotFound(String),
    #[error(
        "session `{0}` is open in another Keel process (or another client of this one); close it there first"
    )]
    Locked(String),
    #[error("session `{0}` already exists")]
    Exists(String),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Corrupt {
        path: PathBuf,
        source: serde_json::Error,
    },
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What `meta.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    pub id: String,
    /// The primary workspace root.
    pub cwd: PathBuf,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_directories: Vec<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// RFC 3339, UTC.
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
}

impl SessionMeta {
    /// The metadata of a session created now.
    pub fn new(id: impl Into<String>, cwd: PathBuf, additional_directories: Vec<PathBuf>) -> Self {
        Self {
            id: id.into(),
            cwd,
            additional_directories,
            title: None,
            created_at: rfc3339(SystemTime::now()),
            forked_from: None,
        }
    }
}

/// A stored session as a listing shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    pub meta: SessionMeta,
    /// RFC 3339, UTC: when its log last changed.
    pub updated_at: String,
    updated: SystemTime,
}

/// The store's directory.
#[derive(Debug, Clone)]
pub struct SessionStore {
    root: PathBuf,
}

/// Whether `id` may name a stored session.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl SessionStore {
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn dir(&self, id: &str) -> Result<PathBuf, StoreError> {
        if valid_id(id) {
            Ok(self.root.join(id))
        } else {
            Err(StoreError::InvalidId(id.to_owned()))
        }
    }

    /// Whether a session `id` is stored.
    pub fn contains(&self, id: &str) -> bool {
        self.dir(id).is_ok_and(|dir| store_files::is_dir(&dir))
    }

    /// Creates a new session and opens its (empty) log.
    pub fn create(&self, meta: SessionMeta) -> Result<SessionLog, StoreError> {
        let dir = self.dir(&meta.id)?;
        if store_files::is_dir(&dir) {
            return Err(StoreError::Exists(meta.id));
        }
        store_files::create_private_dir(&dir).map_err(io_error(&dir))?;
        let log = lock(&dir.join(LOG_FILE), &meta.id, true)?;
        write_meta(&dir, &meta)?;
        Ok(SessionLog {
            dir,
            meta: Mutex::new(meta),
            log: Mutex::new(Some(log)),
            failure: Mutex::default(),
        })
    }

    /// Opens a stored session: takes its lock and reads its events (a torn last line is cut).
    pub fn open(&self, id: &str) -> Result<(SessionLog, Vec<StoredEvent>), StoreError> {
        let dir = self.dir(id)?;
        if !store_files::is_dir(&dir) {
            return Err(StoreError::NotFound(id.to_owned()));
        }
        let path = dir.join(LOG_FILE);
        let mut log = lock(&path, id, true)?;
        let meta = read_meta(&dir, id)?;
        let bytes = log.read_all().map_err(io_error(&path))?;
        let parsed = parse_log(&bytes, &path);
        if parsed.valid_len < bytes.len() as u64 {
            tracing::warn!(
                session = id,
                "dropping the torn last line of the session log"
            );
            log.truncate(parsed.valid_len).map_err(io_error(&path))?;
        }
        let session = SessionLog {
            dir,
            meta: Mutex::new(meta),
            log: Mutex::new(Some(log)),
            failure: Mutex::default(),
        };
        Ok((session, parsed.events))
    }

    /// The stored metadata of session `id` (its workspace, title, ...), without its log.
    pub fn meta(&self, id: &str) -> Result<SessionMeta, StoreError> {
        let dir = self.dir(id)?;
        if !store_files::is_dir(&dir) {
            return Err(StoreError::NotFound(id.to_owned()));
        }
        read_meta(&dir, id)
    }

    /// Reads a stored session without opening it (it may be open elsewhere).
    pub fn read(&self, id: &str) -> Result<(SessionMeta, Vec<StoredEvent>), StoreError> {
        let dir = self.dir(id)?;
        if !store_files::is_dir(&dir) {
            return Err(StoreError::NotFound(id.to_owned()));
        }
        let meta = read_meta(&dir, id)?;
        let path = dir.join(LOG_FILE);
        let bytes = store_files::read_bytes(&path)
            .map_err(io_error(&path))?
            .unwrap_or_default();
        Ok((meta, parse_log(&bytes, &path).events))
    }

    /// Copies session `from` (as it stands on disk) into a new session described by `meta`,
    /// and opens the copy.
    pub fn fork(
        &self,
        from: &str,
        mut meta: SessionMeta,
    ) -> Result<(SessionLog, Vec<StoredEvent>), StoreError> {
        let (source, events) = self.read(from)?;
        meta.forked_from = Some(from.to_owned());
        if meta.title.is_none() {
            meta.title = Some(match source.title {
                Some(title) => format!("Fork of {title}"),
                None => "Fork of an untitled session".to_owned(),
            });
        }
        let log = self.create(meta)?;
        for event in &events {
            log.append(event)?;
        }
        Ok((log, events))
    }

    /// Every stored session, most recently updated first; only those whose `cwd` is `cwd` when
    /// given. Unreadable entries are skipped (with a warning).
    pub fn list(&self, cwd: Option<&Path>) -> Result<Vec<SessionSummary>, StoreError> {
        let dirs = store_files::subdirectories(&self.root).map_err(io_error(&self.root))?;
        let mut sessions = Vec::with_capacity(dirs.len());
        for dir in dirs {
            let Some(id) = dir.file_name().and_then(|name| name.to_str()) else {
                continue;
            };
            if !valid_id(id) {
                continue;
            }
            let meta = match read_meta(&dir, id) {
                Ok(meta) => meta,
                Err(error) => {
                    tracing::warn!(%error, "skipping an unreadable stored session");
                    continue;
                }
            };
            if cwd.is_some_and(|cwd| meta.cwd != cwd) {
                continue;
            }
            // Opened and never used (or still empty): nothing to show.
            if store_files::size(&dir.join(LOG_FILE)).unwrap_or(0) == 0 {
                continue;
            }
            let updated = store_files::modified(&dir.join(LOG_FILE))
                .or_else(|| store_files::modified(&dir.join(META_FILE)))
                .unwrap_or(SystemTime::UNIX_EPOCH);
            sessions.push(SessionSummary {
                meta,
                updated_at: rfc3339(updated),
                updated,
            });
        }
        sessions.sort_by(|a, b| {
            b.updated
                .cmp(&a.updated)
                .then_with(|| a.meta.id.cmp(&b.meta.id))
        });
        Ok(sessions)
    }

    /// Deletes a stored session. Fails when it is open (locked).
    pub fn delete(&self, id: &str) -> Result<(), StoreError> {
        let dir = self.dir(id)?;
        if !store_files::is_dir(&dir) {
            return Err(StoreError::NotFound(id.to_owned()));
        }
        let held = lock(&dir.join(LOG_FILE), id, true)?;
        store_files::remove_dir(&dir).map_err(io_error(&dir))?;
        drop(held);
        Ok(())
    }
}

fn lock(path: &Path, id: &str, create: bool) -> Result<LockedLog, StoreError> {
    store_files::open_locked(path, create).map_err(|error| match error {
        OpenLogError::Locked => StoreError::Locked(id.to_owned()),
        OpenLogError::Io(source) => StoreError::Io {
            path: path.to_path_buf(),
            source,
        },
    })
}

fn read_meta(dir: &Path, id: &str) -> Result<SessionMeta, StoreError> {
    let path = dir.join(META_FILE);
    let bytes = store_files::read_bytes(&path)
        .map_err(io_error(&path))?
        .ok_or_else(|| StoreError::NotFound(id.to_owned()))?;
    serde_json::from_slice(&bytes).map_err(|error| StoreError::Corrupt {
        path,
        source: error,
    })
}

fn write_meta(dir: &Path, meta: &SessionMeta) -> Result<(), StoreError> {
    let path = dir.join(META_FILE);
    let text = serde_json::to_string_pretty(meta).map_err(|error| StoreError::Corrupt {
        path: path.clone(),
        source: error,
    })?;
    config_files::write_atomically(&path, &text).map_err(io_error(&path))
}

/// The events of a log and how many of its bytes are whole lines.
struct ParsedLog {
    events: Vec<StoredEvent>,
    valid_len: u64,
}

/// Parses a log: every complete line is an event; a last line without its newline is torn
/// (a write cut short) and left out. A complete line that does not parse is skipped with a
/// warning (a newer Keel's event, or damage) rather than losing the rest.
fn parse_log(bytes: &[u8], path: &Path) -> ParsedLog {
    let mut events = Vec::new();
    let mut valid_len = 0;
    let mut rest = bytes;
    while let Some(end) = rest.iter().position(|&b| b == b'\n') {
        let line = &rest[..end];
        if !line.iter().all(u8::is_ascii_whitespace) {
            match serde_json::from_slice::<StoredEvent>(line) {
                Ok(event) => events.push(event),
                Err(error) => tracing::warn!(
                    path = %path.display(),
                    %error,
                    "skipping an unreadable line of a session log"
                ),
            }
        }
        valid_len += end as u64 + 1;
        rest = &rest[end + 1..];
    }
    ParsedLog { events, valid_len }
}

/// An open session's log.
#[derive(Debug)]
pub struct SessionLog {
    dir: PathBuf,
    meta: Mutex<SessionMeta>,
    /// `None` once closed. A session closed without an event is kept (a client may load a
    /// session it created and never prompted); listings leave such sessions out.
    log: Mutex<Option<LockedLog>>,
    /// The first failure to write the log, until the session tells the user
    /// ([`SessionLog::take_failure`]); later failures are only logged.
    failure: Mutex<Failure>,
}

/// Whether the log failed to be written, and whether the user was told.
#[derive(Debug, Default)]
enum Failure {
    #[default]
    None,
    Unreported(StoreError),
    Reported,
}

fn guard<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SessionLog {
    /// Appends one event (one line, one `write`).
    pub fn append(&self, event: &StoredEvent) -> Result<(), StoreError> {
        let path = self.dir.join(LOG_FILE);
        let mut line = serde_json::to_vec(event).map_err(|error| StoreError::Corrupt {
            path: path.clone(),
            source: error,
        })?;
        line.push(b'\n');
        let mut log = guard(&self.log);
        let Some(log) = log.as_mut() else {
            return Err(StoreError::Io {
                path,
                source: std::io::Error::other("the session log is closed"),
            });
        };
        log.append(&line).map_err(io_error(&path))?;
        Ok(())
    }

    /// Appends, logging a failure instead of returning it (a full disk must not end a turn).
    /// The first failure is also kept for the user ([`SessionLog::take_failure`]).
    pub fn record(&self, event: &StoredEvent) {
        if let Err(error) = self.append(event) {
            tracing::warn!(%error, "could not record a session event");
            let mut failure = guard(&self.failure);
            if matches!(*failure, Failure::None) {
                *failure = Failure::Unreported(error);
            }
        }
    }

    /// The first failure to write the log, once: the caller tells the user (a session whose
    /// log cannot be written would otherwise load later with its end missing, unannounced).
    pub fn take_failure(&self) -> Option<StoreError> {
        let mut failure = guard(&self.failure);
        match std::mem::take(&mut *failure) {
            Failure::Unreported(error) => {
                *failure = Failure::Reported;
                Some(error)
            }
            other => {
                *failure = other;
                None
            }
        }
    }

    pub fn meta(&self) -> SessionMeta {
        guard(&self.meta).clone()
    }

    pub fn id(&self) -> String {
        guard(&self.meta).id.clone()
    }

    /// Sets the title (from the first prompt) unless one is set; returns it when it changed.
    pub fn title_from_prompt(&self, prompt: &[UserContent]) -> Option<String> {
        let mut meta = guard(&self.meta);
        if meta.title.is_some() {
            return None;
        }
        let title = title_of(prompt)?;
        meta.title = Some(title.clone());
        if let Err(error) = write_meta(&self.dir, &meta) {
            tracing::warn!(%error, "could not record the session's title");
        }
        Some(title)
    }

    /// Replaces the title (the one the model wrote).
    pub fn set_title(&self, title: &str) {
        let mut meta = guard(&self.meta);
        meta.title = Some(title.to_owned());
        if let Err(error) = write_meta(&self.dir, &meta) {
            tracing::warn!(%error, "could not record the session's title");
        }
    }

    /// Releases the lock; later appends fail. A session never written to stays loadable
    /// (`session/list` leaves it out).
    pub fn close(&self) {
        guard(&self.log).take();
    }
}

/// A title from a prompt: its first non-empty line of text, at most 80 characters.
pub fn title_of(prompt: &[UserContent]) -> Option<String> {
    let text = prompt.iter().find_map(|content| match content {
        UserContent::Text { text } => text.lines().map(str::trim).find(|line| !line.is_empty()),
        _ => None,
    })?;
    let mut title: String = text.chars().take(TITLE_CHARS).collect();
    if text.chars().count() > TITLE_CHARS {
        title.push('…');
    }
    Some(title)
}

/// `time` as RFC 3339 in UTC, to the second.
pub fn rfc3339(time: SystemTime) -> String {
    let secs = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let (year, month, day) = civil_from_days(days);
    let rest = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// Days since 1970-01-01 to a (year, month, day) in the proleptic Gregorian calendar.
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Message;

    #[expect(
        clippy::disallowed_methods,
        reason = "the tests' store lives in a temp dir"
    )]
    fn store() -> (tempfile::TempDir, SessionStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::new(dir.path().join("sessions"));
        (dir, store)
    }

    fn text(message_id: &str, text: &str) -> StoredEvent {
        StoredEvent::Text {
            message_id: message_id.into(),
            text: text.into(),
        }
    }

    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "the test plays a crash that cut a write short"
    )]
    fn events_survive_a_reopen_and_a_torn_last_line_is_cut() {
        let (_dir, store) = store();
        let log = store
            .create(SessionMeta::new("s1", "/w".into(), Vec::new()))
            .unwrap();
        log.append(&text("m", "one")).unwrap();
        log.append(&StoredEvent::Message {
            message: Message::user_text("hi"),
        })
        .unwrap();
        drop(log);
        // A write cut short by a crash.
        let path = store.root().join("s1").join(LOG_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(br#"{"type":"text","message_id":"m","te"#);
        std::fs::write(&path, &bytes).unwrap();
        let (log, events) = store.open("s1").unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(model_history(&events), vec![Message::user_text("hi")]);
        log.append(&text("m", "two")).unwrap();
        drop(log);
        let (_log, events) = store.open("s1").unwrap();
        assert_eq!(events.len(), 3);
        assert_eq!(events[2], text("m", "two"));
    }

    #[test]
    fn a_second_opener_gets_a_clear_error_until_the_first_closes() {
        let (_dir, store) = store();
        let log = store
            .create(SessionMeta::new("s1", "/w".into(), Vec::new()))
            .unwrap();
        let error = store.open("s1").unwrap_err();
        assert!(matches!(error, StoreError::Locked(ref id) if id == "s1"));
        assert!(error.to_string().contains("open in another Keel process"));
        assert!(matches!(
            store.delete("s1").unwrap_err(),
            StoreError::Locked(_)
        ));
        log.append(&text("m", "kept")).unwrap();
        log.close();
        let (_log, events) = store.open("s1").unwrap();
        assert_eq!(events, vec![text("m", "kept")]);
    }

    #[test]
    fn the_first_failed_write_is_kept_for_the_user_once() {
        let (_dir, store) = store();
        let log = store
            .create(SessionMeta::new("s1", "/w".into(), Vec::new()))
            .unwrap();
        log.record(&text("m", "kept"));
        assert!(log.take_failure().is_none());
        // Closed, the log refuses every append: the first failure is told, once.
        log.close();
        log.record(&text("m", "lost"));
        log.record(&text("m", "lost too"));
        let failure = log.take_failure().unwrap();
        assert!(
            matches!(&failure, StoreError::Io { source, .. } if source.to_string().contains("closed")),
            "{failure:?}"
        );
        assert!(std::error::Error::source(&failure).is_some());
        log.record(&text("m", "still lost"));
        assert!(log.take_failure().is_none());
    }

    #[test]
    fn ids_that_could_name_a_path_are_refused() {
        let (_dir, store) = store();
        for id in ["../x", "a/b", "", ".", "..", "a b", "x\0"] {
            assert!(matches!(
                store.open(id).unwrap_err(),
                StoreError::InvalidId(_)
            ));
            assert!(matches!(
                store.create(SessionMeta::new(id, "/w".into(), Vec::new())),
                Err(StoreError::InvalidId(_))
            ));
        }
    }

    #[test]
    fn listing_filters_by_cwd_and_titles_come_from_the_first_prompt() {
        let (_dir, store) = store();
        let a = store
            .create(SessionMeta::new("a", "/w1".into(), Vec::new()))
            .unwrap();
        let b = store
            .create(SessionMeta::new("b", "/w2".into(), Vec::new()))
            .unwrap();
        let unused = store
            .create(SessionMeta::new("unused", "/w1".into(), Vec::new()))
            .unwrap();
        a.append(&text("m", "a")).unwrap();
        b.append(&text("m", "b")).unwrap();
        let prompt = [UserContent::Text {
            text: "\n  Fix the failing test in parser.rs  \nmore".into(),
        }];
        assert_eq!(
            a.title_from_prompt(&prompt).as_deref(),
            Some("Fix the failing test in parser.rs")
        );
        assert_eq!(a.title_from_prompt(&prompt), None);
        let all = store.list(None).unwrap();
        assert_eq!(all.len(), 2);
        let only = store.list(Some(Path::new("/w1"))).unwrap();
        assert_eq!(only.len(), 1);
        assert_eq!(
            only[0].meta.title.as_deref(),
            Some("Fix the failing test in parser.rs")
        );
        assert!(only[0].updated_at.ends_with('Z'));
        // A session closed without an event stays loadable, and unlisted.
        unused.close();
        assert!(store.contains("unused"));
        assert!(store.open("unused").unwrap().1.is_empty());
        assert_eq!(store.list(None).unwrap().len(), 2);
        a.close();
        assert!(store.contains("a"));
    }

    #[test]
    fn fork_copies_and_delete_removes() {
        let (_dir, store) = store();
        let log = store
            .create(SessionMeta::new("a", "/w".into(), Vec::new()))
            .unwrap();
        log.append(&text("m", "one")).unwrap();
        let (fork, events) = store
            .fork("a", SessionMeta::new("b", "/w".into(), Vec::new()))
            .unwrap();
        assert_eq!(events, vec![text("m", "one")]);
        assert_eq!(fork.meta().forked_from.as_deref(), Some("a"));
        fork.close();
        assert_eq!(store.read("b").unwrap().1, vec![text("m", "one")]);
        log.close();
        store.delete("a").unwrap();
        assert!(!store.contains("a"));
        assert!(matches!(
            store.open("a").unwrap_err(),
            StoreError::NotFound(_)
        ));
    }

    #[test]
    fn timestamps_are_rfc3339() {
        let time = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_764_037_805);
        assert_eq!(rfc3339(time), "2025-11-25T02:30:05Z");
    }
}
