//! [`History`]: the conversation as the session keeps it and a request carries it.
//!
//! A request borrows the session's history instead of copying it: both hold the same
//! reference-counted list, and the session's next change copies it only if a request still
//! holds it (it does not, once the request's body is built). Each message's wire form is
//! serialized once and kept ([`History::anthropic_runs`], [`History::anthropic`]), so a long
//! conversation does not cost a serialization of every earlier message in every request; only
//! changed messages are serialized again. The kept forms of the conversation's leading messages
//! are joined into a few runs of bytes that the request body sends as they are: a request
//! neither serializes nor copies the earlier conversation. Appending or merging into the last
//! message ([`History::push_merged`]) keeps what was serialized of the earlier ones; any other
//! change through `DerefMut` forgets it all.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::{Message, Role};

/// What is kept of one message once serialized.
#[derive(Debug, Default, Clone)]
struct Serialized {
    /// Anthropic's form of the message without a cache breakpoint, for a message the runs do
    /// not cover (`None`: not serialized yet; `Some(None)`: the message sends nothing).
    anthropic: Option<Option<Bytes>>,
    /// The length of the message as JSON ([`History::json_len`]).
    json_len: Option<usize>,
}

/// Consecutive messages' Anthropic forms, joined by commas (empty when none of them sends
/// anything).
#[derive(Debug, Clone)]
struct Run {
    /// The index of the message after the run's last.
    end: usize,
    bytes: Bytes,
}

/// What is kept of the history's serialized forms.
#[derive(Debug, Default, Clone)]
struct Kept {
    slots: Vec<Serialized>,
    /// Runs covering the messages from the first on, in order. Each run is more than twice as
    /// long as the next (runs are merged when one is not), so a conversation of any length is
    /// a few runs, and each byte is copied a few times in the history's life.
    runs: Vec<Run>,
}

impl Kept {
    /// Forgets the forms of the messages from `keep` on.
    fn truncate(&mut self, keep: usize) {
        self.slots.truncate(keep);
        while self.runs.last().is_some_and(|run| run.end > keep) {
            self.runs.pop();
        }
    }

    fn covered(&self) -> usize {
        self.runs.last().map_or(0, |run| run.end)
    }

    /// Adds the run of the messages from [`Kept::covered`] to `end`, merging the last runs
    /// while the last is not less than half the one before it.
    fn push(&mut self, end: usize, bytes: Vec<u8>) {
        self.runs.push(Run {
            end,
            bytes: Bytes::from(bytes),
        });
        while let [.., before, last] = self.runs.as_slice()
            && 2 * last.bytes.len() >= before.bytes.len()
        {
            let mut joined = Vec::with_capacity(before.bytes.len() + 1 + last.bytes.len());
            joined.extend_from_slice(&before.bytes);
            if !before.bytes.is_empty() && !last.bytes.is_empty() {
                joined.push(b',');
            }
            joined.extend_from_slice(&last.bytes);
            let end = last.end;
            self.runs.truncate(self.runs.len() - 2);
            self.runs.push(Run {
                end,
                bytes: Bytes::from(joined),
            });
        }
    }
}

/// The conversation, oldest first: shared between the session and its requests, with each
/// message's serialized forms kept once computed.
#[derive(Debug, Default, Clone)]
pub struct History {
    messages: Arc<Vec<Message>>,
    serialized: Arc<Mutex<Kept>>,
}

impl History {
    pub fn new(messages: Vec<Message>) -> Self {
        Self {
            messages: Arc::new(messages),
            serialized: Arc::default(),
        }
    }

    /// The messages, as a plain list.
    pub fn to_vec(&self) -> Vec<Message> {
        self.messages.as_ref().clone()
    }

    /// Adds a message, merging a user message into a trailing user message (so roles keep
    /// alternating). What was serialized of the earlier messages is kept.
    pub fn push_merged(&mut self, message: Message) {
        let keep = self.messages.len().saturating_sub(1);
        self.detach(keep);
        push_merged(Arc::make_mut(&mut self.messages), message);
    }

    /// Serialized forms of this history from now on are its own; at most the first `keep`
    /// messages' are kept.
    fn detach(&mut self, keep: usize) {
        if let Some(own) = Arc::get_mut(&mut self.serialized) {
            own.get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .truncate(keep);
            return;
        }
        let mut kept = self.lock().clone();
        kept.truncate(keep);
        self.serialized = Arc::new(Mutex::new(kept));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.serialized
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The Anthropic forms of the leading messages, in runs of bytes to send as they are
    /// (empty runs left out), and the index of the first message they do not cover. The runs
    /// are extended over the messages before `upto` as far as `keepable` allows; `serialize`
    /// appends one message's form (nothing when it sends nothing) and says whether it could.
    pub(super) fn anthropic_runs(
        &self,
        upto: usize,
        keepable: impl Fn(&Message) -> bool,
        mut serialize: impl FnMut(&Message, &mut Vec<u8>) -> bool,
    ) -> (Vec<Bytes>, usize) {
        let mut kept = self.lock();
        let from = kept.covered();
        let mut end = from;
        let mut bytes = Vec::new();
        for message in self.messages.get(from..upto).unwrap_or_default() {
            if !keepable(message) {
                break;
            }
            let before = bytes.len();
            if before > 0 {
                bytes.push(b',');
            }
            let start = bytes.len();
            let serialized = serialize(message, &mut bytes);
            if !serialized || bytes.len() == start {
                bytes.truncate(before);
            }
            if !serialized {
                break;
            }
            end += 1;
        }
        if end > from {
            kept.push(end, bytes);
        }
        let runs = kept
            .runs
            .iter()
            .filter(|run| !run.bytes.is_empty())
            .map(|run| run.bytes.clone())
            .collect();
        (runs, kept.covered())
    }

    /// Message `index` serialized by `serialize` for Anthropic, computed once.
    pub(super) fn anthropic(
        &self,
        index: usize,
        serialize: impl FnOnce(&Message) -> Option<Bytes>,
    ) -> Option<Bytes> {
        if let Some(done) = self
            .lock()
            .slots
            .get(index)
            .and_then(|slot| slot.anthropic.clone())
        {
            return done;
        }
        let wire = serialize(self.messages.get(index)?);
        let mut serialized = self.lock();
        if serialized.slots.len() <= index {
            serialized.slots.resize_with(index + 1, Serialized::default);
        }
        serialized.slots[index].anthropic = Some(wire.clone());
        wire
    }

    /// The length of the messages as a JSON array, each message's counted once.
    pub fn json_len(&self) -> usize {
        let mut serialized = self.lock();
        if serialized.slots.len() < self.messages.len() {
            serialized
                .slots
                .resize_with(self.messages.len(), Serialized::default);
        }
        let commas = self.messages.len().saturating_sub(1);
        2 + commas
            + self
                .messages
                .iter()
                .zip(serialized.slots.iter_mut())
                .map(|(message, slot)| *slot.json_len.get_or_insert_with(|| json_len(message)))
                .sum::<usize>()
    }
}

impl Deref for History {
    type Target = Vec<Message>;

    fn deref(&self) -> &Vec<Message> {
        &self.messages
    }
}

/// Any change but [`History::push_merged`]: what was serialized is forgotten.
impl DerefMut for History {
    fn deref_mut(&mut self) -> &mut Vec<Message> {
        self.detach(0);
        Arc::make_mut(&mut self.messages)
    }
}

impl From<Vec<Message>> for History {
    fn from(messages: Vec<Message>) -> Self {
        Self::new(messages)
    }
}

impl PartialEq for History {
    fn eq(&self, other: &Self) -> bool {
        self.messages == other.messages
    }
}

/// The length of `value` as JSON, counted without building the text.
pub(crate) fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => 0,
    }
}

impl<'a> IntoIterator for &'a History {
    type Item = &'a Message;
    type IntoIter = std::slice::Iter<'a, Message>;

    fn into_iter(self) -> Self::IntoIter {
        self.messages.iter()
    }
}

/// Appends `message`, merging it into a trailing message of the same role when both are the
/// user's (roles must alternate).
pub fn push_merged(history: &mut Vec<Message>, message: Message) {
    match history.last_mut() {
        Some(last) if last.role == Role::User && message.role == Role::User => {
            last.content.extend(message.content);
        }
        _ => history.push(message),
    }
}
