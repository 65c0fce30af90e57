//! [`History`]: the conversation as the session keeps it and a request carries it.
//!
//! A request borrows the session's history instead of copying it: both hold the same
//! reference-counted list, and the session's next change copies it only if a request still
//! holds it (it does not, once the request's body is built). Each message's wire form is
//! serialized once and kept beside it ([`History::wire`]), so a long conversation does not cost a
//! serialization of every earlier message in every request; only changed messages are serialized
//! again. Appending or merging into the last message ([`History::push_merged`]) keeps what was
//! serialized of the earlier ones; any other change through `DerefMut` forgets it all.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;

use super::{Message, Role};

/// What is kept of one message once serialized.
#[derive(Debug, Default, Clone)]
struct Serialized {
    /// Anthropic's form of the message without a cache breakpoint (`None`: not serialized yet;
    /// `Some(None)`: the message sends nothing).
    anthropic: Option<Option<Arc<RawValue>>>,
    /// The length of the message as JSON ([`History::json_len`]).
    json_len: Option<usize>,
}

/// The conversation, oldest first: shared between the session and its requests, with each
/// message's serialized forms kept once computed.
#[derive(Debug, Default, Clone)]
pub struct History {
    messages: Arc<Vec<Message>>,
    serialized: Arc<Mutex<Vec<Serialized>>>,
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

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Serialized>> {
        self.serialized
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Message `index` serialized by `serialize` for Anthropic, computed once.
    pub(super) fn anthropic(
        &self,
        index: usize,
        serialize: impl FnOnce(&Message) -> Option<Arc<RawValue>>,
    ) -> Option<Arc<RawValue>> {
        if let Some(done) = self
            .lock()
            .get(index)
            .and_then(|slot| slot.anthropic.clone())
        {
            return done;
        }
        let wire = serialize(self.messages.get(index)?);
        let mut serialized = self.lock();
        if serialized.len() <= index {
            serialized.resize_with(index + 1, Serialized::default);
        }
        serialized[index].anthropic = Some(wire.clone());
        wire
    }

    /// The length of the messages as a JSON array, each message's counted once.
    pub fn json_len(&self) -> usize {
        let mut serialized = self.lock();
        if serialized.len() < self.messages.len() {
            serialized.resize_with(self.messages.len(), Serialized::default);
        }
        let commas = self.messages.len().saturating_sub(1);
        2 + commas
            + self
                .messages
                .iter()
                .zip(serialized.iter_mut())
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
