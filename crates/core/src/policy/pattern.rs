//! Patterns: how a rule names the subjects it applies to, and how one is matched.
//!
//! - [`Pattern`]: `*`, an exact subject, a prefix (whole words of a command, whole components
//!   of a path), a glob, or the built-in `read-only` command [`CommandClass`]; globs are
//!   compiled when the rule is loaded.
//! - `Target`: one subject of a call (a path in its three spellings, a peeled simple command,
//!   a raw command line, a host, an MCP name).
//!
//! Matching is deliberately asymmetric: a rule that restricts (deny, ask) matches readily
//! (case-insensitively and after Unicode NFC normalisation for paths, on the program's base
//! name for commands), a rule that permits (allow) matches only the literal subject. A spelling
//! trick can therefore never turn a deny into an allow; at worst it turns an allow into a prompt.

use std::fmt;

use globset::{GlobBuilder, GlobMatcher};

/// Longest glob or prefix a rule may hold (a longer one is refused when the rule loads).
pub const MAX_PATTERN_BYTES: usize = 4096;

/// Built-in command classes a pattern may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandClass {
    /// Commands that only read, with their arguments checked (see `commands::is_read_only`).
    ReadOnly,
}

impl CommandClass {
    pub fn as_str(self) -> &'static str {
        match self {
            CommandClass::ReadOnly => "read-only",
        }
    }
}

/// The shape of a pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternKind {
    /// `*` or no pattern: every subject.
    Any,
    /// A subject spelled out in full (no glob characters).
    Exact,
    /// `prefix = "..."`: whole words of a command, whole components of a path.
    Prefix,
    /// A glob (`*`, `**`, `?`, `[..]`, `{a,b}`).
    Glob,
    /// `class = "read-only"`.
    Class,
}

/// What a pattern is matched against: one subject of a call.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target<'a> {
    /// A file: workspace-relative when inside a root, the absolute canonical path, the
    /// `~/`-relative form under the home directory, the `{session}/`-relative form under the
    /// session's scratch directory.
    Path {
        relative: Option<&'a str>,
        absolute: &'a str,
        home: Option<&'a str>,
        session: Option<&'a str>,
    },
    /// One simple command of a plain command line (wrappers peeled).
    Command {
        words: &'a [String],
        text: &'a str,
        read_only: bool,
        /// A grammar governs the command and the call is outside it: prefix and glob allow
        /// rules (an "always" answer for the same command) do not cover it.
        outside_grammar: bool,
    },
    /// A command line that is not plain: only restrictive rules are matched against it.
    Raw(&'a str),
    /// A network host (lower-case, ASCII).
    Host(&'a str),
    /// An MCP `server/tool`, or another free-form name.
    Name(&'a str),
    /// A call with no subject.
    Nothing,
}

#[derive(Debug, Clone)]
struct Globs {
    /// `*` stops at `/`: for paths and names.
    path: GlobMatcher,
    /// `*` crosses `/`: for commands and hosts.
    text: GlobMatcher,
    /// Case-insensitive forms, used by restrictive rules.
    path_folded: GlobMatcher,
    text_folded: GlobMatcher,
    /// Both path forms match every subject (`**`: the regex `^.*$`, whose `.` matches any
    /// byte), so the search gate's path decisions skip running them.
    every_path: bool,
    /// `path` and `path_folded` as DFAs the search gate runs over a directory's spelling once,
    /// then over each file name ([`Pattern::in_dir`]); built on first use, `None` when the
    /// glob's DFA would be too large.
    dfas: [std::sync::OnceLock<Option<std::sync::Arc<PathDfa>>>; 2],
}

/// A glob's path regex as a DFA anchored at the start of the subject (`MatchKind::All`: any
/// match counts, as for `is_match`).
type PathDfa = regex_automata::dfa::dense::DFA<Vec<u32>>;

/// Largest DFA built for a glob (a larger one is matched with its regex, file by file).
const MAX_DFA_BYTES: usize = 1 << 20;

/// The spelling of a path a pattern is matched against ([`Pattern::path_form`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathForm {
    /// `*`: every subject, whatever its spellings.
    Every,
    /// A class: no path.
    Never,
    /// Workspace-relative.
    Relative,
    /// Absolute (`/...`).
    Absolute,
    /// Under the home directory (`~/...`).
    Home,
    /// Under the session's scratch directory (`{session}/...`).
    Session,
}

/// How a path pattern matches the files of one directory, whose spelling in the pattern's
/// [`PathForm`] is a prefix `p` (each file's spelling being `p` + its name).
#[derive(Debug, Clone)]
pub(crate) enum InDir {
    /// Every file of the directory.
    Every,
    /// No file of it.
    None,
    /// The file of that name (folded for restrictive rules).
    Named(String),
    /// The files whose name takes the glob's DFA from this state (after `p`) to a match.
    Dfa(
        std::sync::Arc<PathDfa>,
        regex_automata::util::primitives::StateID,
    ),
    /// Matched file by file with the glob's regex on `p` + the name.
    Glob,
}

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Pattern {
    kind: PatternKind,
    text: String,
    globs: Option<Box<Globs>>,
    /// The length of the literal text (characters, glob characters not counted), for
    /// [`Pattern::specificity`], which ranks every matching rule of every decision.
    literal: usize,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.text == other.text
    }
}

const GLOB_CHARS: &[char] = &['*', '?', '[', ']', '{', '}'];

/// The name path patterns use for the session's scratch directory (spilled tool output).
pub const SESSION: &str = "{session}";

impl Pattern {
    fn new(kind: PatternKind, text: String, globs: Option<Box<Globs>>) -> Self {
        let literal = match kind {
            PatternKind::Exact | PatternKind::Prefix => text.chars().count(),
            PatternKind::Glob => text.chars().filter(|c| !GLOB_CHARS.contains(c)).count(),
            PatternKind::Class | PatternKind::Any => 0,
        };
        Self {
            kind,
            text,
            globs,
            literal,
        }
    }

    pub fn any() -> Self {
        Self::new(PatternKind::Any, "*".to_owned(), None)
    }

    /// A literal subject, or a glob when the text holds glob characters; `*` is [`Pattern::any`].
    // String error: the reason is the rule error's text.
    pub fn glob(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("the pattern is empty".to_owned());
        }
        if text.len() > MAX_PATTERN_BYTES {
            return Err(format!(
                "the pattern is longer than {MAX_PATTERN_BYTES} bytes"
            ));
        }
        if text == "*" {
            return Ok(Self::any());
        }
        // `{session}` is a name, not a glob alternation.
        let (literal_head, rest) = match text.strip_prefix(SESSION) {
            Some(rest) => ("\\{session\\}", rest),
            None => ("", text),
        };
        if !rest.contains(GLOB_CHARS) {
            return Ok(Self::new(PatternKind::Exact, text.to_owned(), None));
        }
        let source = format!("{literal_head}{rest}");
        let build = |separator: bool, fold: bool, text: &str| {
            GlobBuilder::new(text)
                .literal_separator(separator)
                .backslash_escape(true)
                .case_insensitive(fold)
                .build()
                .map(|g| g.compile_matcher())
                .map_err(|e| e.kind().to_string())
        };
        let folded = nfc(&source);
        let path = build(true, false, &source)?;
        let path_folded = build(true, true, &folded)?;
        let every_path =
            path.glob().regex() == "(?-u)^.*$" && path_folded.glob().regex() == "(?-u)(?i)^.*$";
        let globs = Globs {
            path,
            text: build(false, false, &source)?,
            path_folded,
            text_folded: build(false, true, &folded)?,
            every_path,
            dfas: Default::default(),
        };
        Ok(Self::new(
            PatternKind::Glob,
            text.to_owned(),
            Some(Box::new(globs)),
        ))
    }

    /// A literal subject, never read as a glob.
    pub fn exact(text: &str) -> Self {
        Self::new(PatternKind::Exact, text.trim().to_owned(), None)
    }

    /// A prefix: whole words for commands, whole components for paths and names.
    // String error: the reason is the rule error's text.
    pub fn prefix(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("the prefix is empty".to_owned());
        }
        if text.len() > MAX_PATTERN_BYTES {
            return Err(format!(
                "the prefix is longer than {MAX_PATTERN_BYTES} bytes"
            ));
        }
        Ok(Self::new(PatternKind::Prefix, text.to_owned(), None))
    }

    pub fn class(class: CommandClass) -> Self {
        Self::new(PatternKind::Class, class.as_str().to_owned(), None)
    }

    pub fn kind(&self) -> PatternKind {
        self.kind
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// (shape, literal length): exact (3) > prefix or glob (2, longer literal text first) >
    /// class (1) > any (0).
    pub fn specificity(&self) -> (u8, usize) {
        match self.kind {
            PatternKind::Exact => (3, self.literal),
            PatternKind::Prefix | PatternKind::Glob => (2, self.literal),
            PatternKind::Class => (1, 0),
            PatternKind::Any => (0, 0),
        }
    }

    /// Whether the pattern matches a target. `restrictive` selects the forgiving matching used
    /// by deny and ask rules.
    pub(crate) fn matches(&self, target: &Target<'_>, restrictive: bool) -> bool {
        if self.kind == PatternKind::Any {
            return true;
        }
        match *target {
            Target::Nothing => false,
            Target::Path {
                relative,
                absolute,
                home,
                session,
            } => {
                let subject = if self.text.starts_with('/') {
                    Some(absolute)
                } else if self.text.starts_with("~/") || self.text == "~" {
                    home
                } else if self.text.starts_with(SESSION) {
                    session
                } else {
                    relative
                };
                subject.is_some_and(|s| self.matches_path(s, restrictive))
            }
            Target::Command {
                words,
                text,
                read_only,
                outside_grammar,
            } => {
                if self.kind == PatternKind::Class {
                    return read_only;
                }
                if !restrictive
                    && outside_grammar
                    && matches!(self.kind, PatternKind::Prefix | PatternKind::Glob)
                {
                    return false;
                }
                if self.matches_command(words, text) {
                    return true;
                }
                // A deny on `rm` also catches `/bin/rm`.
                if restrictive && let Some(first) = words.first() {
                    let base = base_name(first);
                    if base != first {
                        let mut renamed = words.to_vec();
                        renamed[0] = base.to_owned();
                        return self.matches_command(&renamed, &renamed.join(" "));
                    }
                }
                false
            }
            Target::Raw(raw) => {
                let raw = raw.trim();
                match self.kind {
                    PatternKind::Exact => collapse(raw) == collapse(&self.text),
                    PatternKind::Prefix => word_prefix(&collapse(raw), &collapse(&self.text)),
                    PatternKind::Glob => self.glob_text(raw, restrictive),
                    PatternKind::Class | PatternKind::Any => false,
                }
            }
            Target::Host(host) => match self.kind {
                PatternKind::Exact => host.eq_ignore_ascii_case(&self.text),
                PatternKind::Prefix => host.starts_with(&self.text.to_ascii_lowercase()),
                PatternKind::Glob => self.glob_text(host, true),
                PatternKind::Class | PatternKind::Any => false,
            },
            Target::Name(name) => self.matches_path(name, restrictive),
        }
    }

    fn matches_path(&self, subject: &str, restrictive: bool) -> bool {
        let pattern = self.text.trim_start_matches("./").trim_end_matches('/');
        let (subject, pattern) = if restrictive {
            (fold(subject), fold(pattern))
        } else {
            (
                std::borrow::Cow::Borrowed(subject),
                std::borrow::Cow::Borrowed(pattern),
            )
        };
        match self.kind {
            PatternKind::Exact => subject == pattern,
            PatternKind::Prefix => {
                subject == pattern
                    || pattern.is_empty()
                    || subject
                        .strip_prefix(&*pattern)
                        .is_some_and(|rest| rest.starts_with('/'))
            }
            PatternKind::Glob => self.globs.as_ref().is_some_and(|g| {
                if g.every_path {
                    true
                } else if restrictive {
                    g.path_folded.is_match(&*subject)
                } else {
                    g.path.is_match(&*subject)
                }
            }),
            PatternKind::Class => false,
            PatternKind::Any => true,
        }
    }

    fn matches_command(&self, words: &[String], text: &str) -> bool {
        match self.kind {
            PatternKind::Exact => text == collapse(&self.text),
            PatternKind::Prefix => {
                let prefix = command_words(&self.text);
                !prefix.is_empty()
                    && prefix.len() <= words.len()
                    && prefix.iter().zip(words).all(|(p, w)| p == w)
            }
            PatternKind::Glob => self.glob_text(text, false),
            PatternKind::Class | PatternKind::Any => false,
        }
    }

    fn glob_text(&self, subject: &str, folded: bool) -> bool {
        self.globs.as_ref().is_some_and(|g| {
            if folded {
                g.text_folded.is_match(subject)
            } else {
                g.text.is_match(subject)
            }
        })
    }
}

/// The search gate's matching of path patterns one directory at a time: what
/// [`Pattern::matches`] says of a [`Target::Path`] whose spelling in the pattern's form is a
/// directory's prefix followed by a file name.
impl Pattern {
    /// The spelling of a path this pattern is matched against, as [`Pattern::matches`] picks it.
    pub(crate) fn path_form(&self) -> PathForm {
        match self.kind {
            PatternKind::Any => PathForm::Every,
            PatternKind::Class => PathForm::Never,
            PatternKind::Exact | PatternKind::Prefix | PatternKind::Glob => {
                if self.text.starts_with('/') {
                    PathForm::Absolute
                } else if self.text.starts_with("~/") || self.text == "~" {
                    PathForm::Home
                } else if self.text.starts_with(SESSION) {
                    PathForm::Session
                } else {
                    PathForm::Relative
                }
            }
        }
    }

    /// The text a path is compared with (exact and prefix patterns): without a leading `./`
    /// or trailing `/`, folded for restrictive matching.
    pub(crate) fn path_text(&self, restrictive: bool) -> String {
        let pattern = self.text.trim_start_matches("./").trim_end_matches('/');
        if restrictive {
            fold(pattern).into_owned()
        } else {
            pattern.to_owned()
        }
    }

    /// How the pattern matches the files of a directory whose spelling in the pattern's form
    /// is `prefix` (empty, or ending with `/`; folded for restrictive matching), each file's
    /// spelling being `prefix` + its name (a name: not empty, without `/`). `text` is
    /// [`Pattern::path_text`] of the same `restrictive`.
    pub(crate) fn in_dir(&self, text: &str, prefix: &str, restrictive: bool) -> InDir {
        // The file named `rest` when the pattern is `prefix` + `rest` and `rest` is a name.
        let named = || {
            text.strip_prefix(prefix)
                .filter(|rest| !rest.is_empty() && !rest.contains('/'))
                .map_or(InDir::None, |rest| InDir::Named(rest.to_owned()))
        };
        match self.kind {
            PatternKind::Any => InDir::Every,
            PatternKind::Class => InDir::None,
            PatternKind::Exact => named(),
            PatternKind::Prefix => {
                // The spelling `prefix` + name is below the pattern when `prefix` already is.
                if text.is_empty()
                    || prefix
                        .strip_prefix(text)
                        .is_some_and(|rest| rest.starts_with('/'))
                {
                    InDir::Every
                } else {
                    named()
                }
            }
            PatternKind::Glob => {
                let Some(globs) = &self.globs else {
                    return InDir::None;
                };
                if globs.every_path {
                    return InDir::Every;
                }
                let Some(dfa) = globs.dfa(restrictive) else {
                    return InDir::Glob;
                };
                use regex_automata::dfa::Automaton as _;
                let start = regex_automata::util::start::Config::new()
                    .anchored(regex_automata::Anchored::Yes);
                let Ok(mut state) = dfa.start_state(&start) else {
                    return InDir::Glob;
                };
                for &byte in prefix.as_bytes() {
                    state = dfa.next_state(state, byte);
                    if dfa.is_dead_state(state) {
                        return InDir::None;
                    }
                }
                InDir::Dfa(dfa.clone(), state)
            }
        }
    }

    /// Whether the pattern matches the file `name` of a directory ([`Pattern::in_dir`] of the
    /// same `prefix` and `restrictive`; `name` folded for restrictive matching).
    pub(crate) fn matches_in_dir(
        &self,
        in_dir: &InDir,
        prefix: &str,
        name: &str,
        restrictive: bool,
    ) -> bool {
        match in_dir {
            InDir::Every => true,
            InDir::None => false,
            InDir::Named(named) => named == name,
            InDir::Dfa(dfa, state) => {
                use regex_automata::dfa::Automaton as _;
                let mut state = *state;
                for &byte in name.as_bytes() {
                    state = dfa.next_state(state, byte);
                }
                dfa.is_match_state(dfa.next_eoi_state(state))
            }
            InDir::Glob => self.globs.as_ref().is_some_and(|g| {
                let subject = format!("{prefix}{name}");
                if restrictive {
                    g.path_folded.is_match(&subject)
                } else {
                    g.path.is_match(&subject)
                }
            }),
        }
    }
}

impl Globs {
    /// The DFA of `path` (`folded`: of `path_folded`), built on first use.
    fn dfa(&self, folded: bool) -> Option<&std::sync::Arc<PathDfa>> {
        let matcher = if folded {
            &self.path_folded
        } else {
            &self.path
        };
        self.dfas[usize::from(folded)]
            .get_or_init(|| path_dfa(matcher.glob().regex()).map(std::sync::Arc::new))
            .as_ref()
    }
}

/// The DFA of a glob's regex (built as globset builds its regex: bytes, `.` matching any byte),
/// when the regex is anchored at both ends (globset's always are) and the DFA stays small.
fn path_dfa(regex: &str) -> Option<PathDfa> {
    use regex_automata::dfa::{StartKind, dense};
    let body = regex.strip_prefix("(?-u)")?;
    let body = body.strip_prefix("(?i)").unwrap_or(body);
    if !body.starts_with('^') || !body.ends_with('$') {
        return None;
    }
    dense::Builder::new()
        .syntax(
            regex_automata::util::syntax::Config::new()
                .utf8(false)
                .dot_matches_new_line(true),
        )
        .thompson(regex_automata::nfa::thompson::Config::new().utf8(false))
        .configure(
            dense::DFA::config()
                .match_kind(regex_automata::MatchKind::All)
                .start_kind(StartKind::Anchored)
                .dfa_size_limit(Some(MAX_DFA_BYTES))
                .determinize_size_limit(Some(MAX_DFA_BYTES)),
        )
        .build(regex)
        .ok()
}

// A code span that outlasts the backticks of the text (a pattern may be an approval key: a
// file name or a command).
use crate::tool::view::code;

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            PatternKind::Any => f.write_str("*"),
            PatternKind::Exact | PatternKind::Glob => write!(f, "pattern {}", code(&self.text)),
            PatternKind::Prefix => write!(f, "prefix {}", code(&self.text)),
            PatternKind::Class => write!(f, "class {}", code(&self.text)),
        }
    }
}

/// `text` with glob metacharacters escaped, for building a glob from a literal path.
pub(crate) fn escape_glob(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if GLOB_CHARS.contains(&c) || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A command prefix's words (shell quoting understood).
pub(crate) fn command_words(text: &str) -> Vec<String> {
    shell_words::split(text)
        .unwrap_or_else(|_| text.split_whitespace().map(str::to_owned).collect())
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn word_prefix(text: &str, prefix: &str) -> bool {
    text.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
}

pub(crate) fn base_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// `nfc(text).to_lowercase()`, the folded spelling restrictive matching compares, borrowed when
/// folding changes nothing (ASCII without capitals: most paths, so the search gate, which folds
/// every path a search finds, allocates nothing for it).
pub(crate) fn fold(text: &str) -> std::borrow::Cow<'_, str> {
    // Without a short cut, so that the check runs over many bytes at once.
    let plain = text.bytes().fold(true, |plain, b| {
        plain & b.is_ascii() & !b.is_ascii_uppercase()
    });
    if plain {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(nfc(text).to_lowercase())
    }
}

/// Unicode NFC, the canonical spelling restrictive matching compares.
pub(crate) fn nfc(text: &str) -> String {
    if text.is_ascii() {
        return text.to_owned();
    }
    icu_normalizer::ComposingNormalizerBorrowed::new_nfc()
        .normalize(text)
        .into_owned()
}

#[cfg(test)]
mod tests;
