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
}

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Pattern {
    kind: PatternKind,
    text: String,
    globs: Option<Box<Globs>>,
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
    pub fn any() -> Self {
        Self {
            kind: PatternKind::Any,
            text: "*".to_owned(),
            globs: None,
        }
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
            return Ok(Self {
                kind: PatternKind::Exact,
                text: text.to_owned(),
                globs: None,
            });
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
        };
        Ok(Self {
            kind: PatternKind::Glob,
            text: text.to_owned(),
            globs: Some(Box::new(globs)),
        })
    }

    /// A literal subject, never read as a glob.
    pub fn exact(text: &str) -> Self {
        Self {
            kind: PatternKind::Exact,
            text: text.trim().to_owned(),
            globs: None,
        }
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
        Ok(Self {
            kind: PatternKind::Prefix,
            text: text.to_owned(),
            globs: None,
        })
    }

    pub fn class(class: CommandClass) -> Self {
        Self {
            kind: PatternKind::Class,
            text: class.as_str().to_owned(),
            globs: None,
        }
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
            PatternKind::Exact => (3, self.text.chars().count()),
            PatternKind::Prefix => (2, self.text.chars().count()),
            PatternKind::Glob => (
                2,
                self.text
                    .chars()
                    .filter(|c| !GLOB_CHARS.contains(c))
                    .count(),
            ),
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

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            PatternKind::Any => f.write_str("*"),
            PatternKind::Exact | PatternKind::Glob => write!(f, "pattern `{}`", self.text),
            PatternKind::Prefix => write!(f, "prefix `{}`", self.text),
            PatternKind::Class => write!(f, "class `{}`", self.text),
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
mod tests {
    use super::*;

    #[test]
    fn a_double_star_matches_every_path_without_its_regex() {
        let all = Pattern::glob("**").unwrap();
        assert!(all.globs.as_ref().is_some_and(|g| g.every_path));
        for path in ["", "a", "/abs/b.rs", ".env", "a/\n/b", "a\u{fffd}b", "x/"] {
            let target = Target::Name(path);
            assert!(
                all.matches(&target, false) && all.matches(&target, true),
                "{path:?}"
            );
            let g = all.globs.as_ref().unwrap();
            assert!(
                g.path.is_match(path) && g.path_folded.is_match(path),
                "{path:?}"
            );
        }
        for glob in ["**/*.rs", "*", "src/**", "**/.env"] {
            let pattern = Pattern::glob(glob).unwrap();
            assert!(
                !pattern.globs.as_ref().is_some_and(|g| g.every_path),
                "{glob}"
            );
        }
    }

    #[test]
    fn specificity_orders_shapes() {
        let exact = Pattern::glob("src/main.rs").unwrap();
        let long = Pattern::glob("src/**/*.rs").unwrap();
        let short = Pattern::glob("**").unwrap();
        let prefix = Pattern::prefix("cargo test").unwrap();
        assert!(exact.specificity() > long.specificity());
        assert!(long.specificity() > short.specificity());
        assert!(prefix.specificity() > Pattern::class(CommandClass::ReadOnly).specificity());
        assert!(
            Pattern::class(CommandClass::ReadOnly).specificity() > Pattern::any().specificity()
        );
    }

    #[test]
    fn restrictive_matching_folds_case_and_normal_form() {
        let rule = Pattern::glob("secrets/**").unwrap();
        let target = |p: &'static str| Target::Path {
            relative: Some(p),
            absolute: "/w/x",
            home: None,
            session: None,
        };
        assert!(rule.matches(&target("SECRETS/a"), true));
        assert!(!rule.matches(&target("SECRETS/a"), false));
        let cafe = Pattern::prefix("docs/caf\u{e9}").unwrap();
        assert!(cafe.matches(&target("docs/cafe\u{301}/x"), true));
        assert!(!cafe.matches(&target("docs/cafe\u{301}/x"), false));
    }

    #[test]
    fn patterns_are_bounded() {
        let long = "a".repeat(MAX_PATTERN_BYTES + 1);
        assert!(Pattern::glob(&format!("{long}*")).is_err());
        assert!(Pattern::prefix(&long).is_err());
        assert!(Pattern::glob(&"a".repeat(MAX_PATTERN_BYTES)).is_ok());
    }

    #[test]
    fn command_prefix_is_word_wise() {
        let p = Pattern::prefix("git status").unwrap();
        let words = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        let w = words("git status --short");
        assert!(p.matches(
            &Target::Command {
                words: &w,
                text: "git status --short",
                read_only: false,
                outside_grammar: false
            },
            false
        ));
        let w = words("git statusx");
        assert!(!p.matches(
            &Target::Command {
                words: &w,
                text: "git statusx",
                read_only: false,
                outside_grammar: false
            },
            false
        ));
        let deny_rm = Pattern::prefix("rm").unwrap();
        let w = words("/bin/rm -rf x");
        assert!(deny_rm.matches(
            &Target::Command {
                words: &w,
                text: "/bin/rm -rf x",
                read_only: false,
                outside_grammar: false
            },
            true
        ));
        assert!(!deny_rm.matches(
            &Target::Command {
                words: &w,
                text: "/bin/rm -rf x",
                read_only: false,
                outside_grammar: false
            },
            false
        ));
    }

    #[test]
    fn session_is_a_name_not_an_alternation() {
        let glob = Pattern::glob("{session}/**").unwrap();
        let prefix = Pattern::prefix("{session}").unwrap();
        let target = |s: &'static str| Target::Path {
            relative: None,
            absolute: "/tmp/s/x",
            home: None,
            session: Some(s),
        };
        for pattern in [&glob, &prefix] {
            assert!(pattern.matches(&target("{session}/out.txt"), false));
        }
        let outside = Target::Path {
            relative: None,
            absolute: "/tmp/s/x",
            home: None,
            session: None,
        };
        assert!(!glob.matches(&outside, false));
        assert_eq!(
            Pattern::glob("{session}/a.txt").unwrap().kind(),
            PatternKind::Exact
        );
    }
}
