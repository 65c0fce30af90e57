//! Configuration errors, and turning a TOML/serde failure into one that names the key, the file,
//! the line and a fix.

use std::ops::Range;
use std::path::PathBuf;

use toml::de::{DeTable, DeValue};

use super::Source;
use super::source::FileLocation;

/// Why a configuration layer was rejected. Every variant names where the problem is; the CLI
/// prints it as is and exits with code 2.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file that must exist (named by `KEEL_CONFIG`) is missing, or a file cannot be read.
    #[error("cannot read {shown}: {source}")]
    Read {
        path: PathBuf,
        shown: String,
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("syntax error at {location}: {message}")]
    Syntax { location: Source, message: String },
    /// A key Keel does not know (usually a typo).
    #[error("{}", unknown_key_message(.key, .location, .suggestion.as_deref(), .expected))]
    UnknownKey {
        /// The dotted path of the key (`tools.read.timeoutms`).
        key: String,
        location: Source,
        /// The closest known key, when one is close.
        suggestion: Option<String>,
        /// Every key allowed there.
        expected: Vec<String>,
    },
    /// A value of the wrong type or outside the allowed set.
    #[error("bad value for `{key}` {} {location}: {expected}", .location.preposition())]
    BadValue {
        key: String,
        location: Source,
        /// What is allowed, and what was found.
        expected: String,
    },
    /// A required key is missing from a table (a rule without `action`).
    #[error("missing key `{key}` in `{table}` {} {location}", .location.preposition())]
    MissingKey {
        key: String,
        table: String,
        location: Source,
    },
    /// A permission pattern names a path variable that does not exist.
    #[error("{}", unknown_variable_message(.variable, .pattern, .location, .suggestion.as_deref(), .known))]
    UnknownVariable {
        variable: String,
        pattern: String,
        location: Source,
        suggestion: Option<String>,
        /// The variables that exist.
        known: &'static [&'static str],
    },
    /// A project provider would send a credential variable the user bound to one host to
    /// another host. Refused even in a trusted project.
    #[error("{0}")]
    CredentialHost(Box<CredentialRefusal>),
}

/// Why a project provider was refused: it pairs a credential variable bound elsewhere with its
/// own endpoint.
#[derive(Debug, thiserror::Error)]
#[error(
    "refused: the project's `[providers.{provider}]` {} {location} would send {variable} to {project_url}, \
     but {variable} belongs to {user_url} ({bound_by}); a project cannot send your credentials elsewhere. \
     Fix: give that provider a variable of its own (api_key_env = \"PROJECT_API_KEY\"), or remove its base_url",
    .location.preposition()
)]
pub struct CredentialRefusal {
    pub provider: String,
    pub variable: String,
    pub project_url: String,
    pub user_url: String,
    /// What binds the variable to `user_url` ("the built-in provider `anthropic`").
    pub bound_by: String,
    pub location: Source,
}

impl ConfigError {
    /// The dotted key the problem is about, when it is about one.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::UnknownKey { key, .. }
            | ConfigError::BadValue { key, .. }
            | ConfigError::MissingKey { key, .. } => Some(key),
            ConfigError::CredentialHost(refusal) => Some(&refusal.provider),
            ConfigError::Read { .. }
            | ConfigError::Syntax { .. }
            | ConfigError::UnknownVariable { .. } => None,
        }
    }

    /// The error as a JSON-RPC error's `data`: `details` (the whole message), `key`, `file`,
    /// `line` and `column` (counting from 1) when the problem has them.
    pub fn data(&self) -> serde_json::Value {
        let mut data = serde_json::Map::new();
        data.insert("details".into(), self.to_string().into());
        if let Some(key) = self.key() {
            data.insert("key".into(), key.into());
        }
        let file = match self {
            ConfigError::Read { path, .. } => Some((path.clone(), None)),
            _ => match self.location() {
                Some(Source::File(location)) => Some((
                    location.path.clone(),
                    Some((location.line, location.column)),
                )),
                _ => None,
            },
        };
        if let Some((path, place)) = file {
            data.insert("file".into(), path.display().to_string().into());
            if let Some((line, column)) = place {
                data.insert("line".into(), line.into());
                data.insert("column".into(), column.into());
            }
        }
        serde_json::Value::Object(data)
    }

    /// Where the problem is, when it has a place.
    pub fn location(&self) -> Option<&Source> {
        match self {
            ConfigError::Read { .. } => None,
            ConfigError::Syntax { location, .. }
            | ConfigError::UnknownKey { location, .. }
            | ConfigError::BadValue { location, .. }
            | ConfigError::MissingKey { location, .. }
            | ConfigError::UnknownVariable { location, .. } => Some(location),
            ConfigError::CredentialHost(refusal) => Some(&refusal.location),
        }
    }
}

fn unknown_key_message(
    key: &str,
    location: &Source,
    suggestion: Option<&str>,
    expected: &[String],
) -> String {
    let mut out = format!("unknown key `{key}` in {location}");
    match suggestion {
        Some(s) => out.push_str(&format!("; did you mean `{s}`?")),
        None if expected.is_empty() => out.push_str("; no keys are allowed there"),
        None => out.push_str(&format!(
            "; expected one of {}",
            expected
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
    out
}

fn unknown_variable_message(
    variable: &str,
    pattern: &str,
    location: &Source,
    suggestion: Option<&str>,
    known: &[&str],
) -> String {
    let mut out = format!(
        "undefined path variable `{{{variable}}}` in permission pattern `{pattern}` {} {location}",
        location.preposition()
    );
    if let Some(s) = suggestion {
        out.push_str(&format!("; did you mean `{{{s}}}`?"));
    }
    let known: Vec<String> = known.iter().map(|k| format!("{{{k}}}")).collect();
    out.push_str(&format!(" Known variables: {}", known.join(", ")));
    out
}

/// A file being checked: its text and how its path is shown, to turn byte offsets into
/// [`Source::File`] locations.
pub(crate) struct FileText<'a> {
    pub path: PathBuf,
    pub shown: String,
    pub text: &'a str,
}

impl FileText<'_> {
    pub fn source_at(&self, offset: usize) -> Source {
        let offset = offset.min(self.text.len());
        let before = self.text.get(..offset).unwrap_or(self.text);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        Source::File(Box::new(FileLocation {
            path: self.path.clone(),
            shown: self.shown.clone(),
            line,
            column,
        }))
    }

    /// Turns a deserialization error of this file into a [`ConfigError`]. `table` is the
    /// file's parsed tree, used to name the key at the error's position.
    pub fn explain(&self, error: &toml::de::Error, table: Option<&DeTable<'_>>) -> ConfigError {
        let span = error.span().unwrap_or(0..0);
        let location = self.source_at(span.start);
        let message = error.message().trim().to_owned();
        let Some(table) = table else {
            return ConfigError::Syntax { location, message };
        };
        let hit = find_span(table, &span, "");
        if let Some(rest) = message.strip_prefix("unknown field ") {
            let mut names = backticked(rest);
            let key = if names.is_empty() {
                String::new()
            } else {
                names.remove(0)
            };
            let path = match &hit {
                Some(Hit::Key(path)) => path.clone(),
                _ => key.clone(),
            };
            let suggestion = did_you_mean(&key, names.iter().map(String::as_str));
            return ConfigError::UnknownKey {
                key: path,
                location,
                suggestion,
                expected: names,
            };
        }
        if let Some(rest) = message.strip_prefix("missing field ") {
            let key = backticked(rest).into_iter().next().unwrap_or_default();
            let table = match hit {
                Some(Hit::Key(path) | Hit::Value(path)) if !path.is_empty() => path,
                _ => "the file".to_owned(),
            };
            return ConfigError::MissingKey {
                key,
                table,
                location,
            };
        }
        match hit {
            Some(Hit::Value(key) | Hit::Key(key)) => ConfigError::BadValue {
                key,
                location,
                expected: explain_value_message(&message),
            },
            None => ConfigError::Syntax { location, message },
        }
    }
}

/// What sits at a span: a key, or a value (by dotted path).
#[derive(Debug, PartialEq)]
enum Hit {
    Key(String),
    Value(String),
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

/// The deepest key or value whose span is exactly `span`.
fn find_span(table: &DeTable<'_>, span: &Range<usize>, prefix: &str) -> Option<Hit> {
    for (key, value) in table {
        let path = join(prefix, key.get_ref());
        if let Some(hit) = find_in_value(value.get_ref(), span, &path) {
            return Some(hit);
        }
        if key.span() == *span {
            return Some(Hit::Key(path));
        }
        if value.span() == *span {
            return Some(Hit::Value(path));
        }
    }
    None
}

fn find_in_value(value: &DeValue<'_>, span: &Range<usize>, path: &str) -> Option<Hit> {
    match value {
        DeValue::Table(table) => find_span(table, span, path),
        DeValue::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
            let item_path = format!("{path}[{i}]");
            find_in_value(item.get_ref(), span, &item_path)
                .or_else(|| (item.span() == *span).then(|| Hit::Value(item_path.clone())))
        }),
        _ => None,
    }
}

/// The backtick-quoted words of a serde message, in order.
fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_owned())
        .collect()
}

/// Rewrites serde's value messages as "expected …, found …".
fn explain_value_message(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let mut names = backticked(rest);
        if !names.is_empty() {
            let found = names.remove(0);
            return format!("expected one of {} (found `{found}`)", names.join(", "));
        }
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix)
            && let Some((found, expected)) = rest.split_once(", expected ")
        {
            return format!("expected {}, found {found}", plain_words(expected));
        }
    }
    message.to_owned()
}

/// Serde's type names in words a user reads (`u32` → `a whole number`).
fn plain_words(expected: &str) -> String {
    let words = match expected.trim() {
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a whole number (0 or more)",
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "a whole number",
        "f32" | "f64" => "a number",
        "a sequence" => "a list (`[...]`)",
        "a map" => "a table (`{...}` or a `[section]`)",
        "char" => "a single character",
        other => return other.to_owned(),
    };
    words.to_owned()
}

/// The candidate closest to `word` (ignoring case), if it is close enough to be a typo.
pub(crate) fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let lower = word.to_lowercase();
    let mut best: Option<(usize, usize, &str)> = None;
    for candidate in candidates {
        let distance = edit_distance(&lower, &candidate.to_lowercase());
        let length_gap = word.len().abs_diff(candidate.len());
        let limit = (word.chars().count().max(candidate.chars().count()) / 3).max(1);
        if distance <= limit && best.is_none_or(|(d, g, _)| (distance, length_gap) < (d, g)) {
            best = Some((distance, length_gap, candidate));
        }
    }
    best.map(|(_, _, c)| c.to_owned())
}

/// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
/// neighbouring characters each cost 1.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for i in 0..=a.len() {
        d[i * width] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(width) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_prefer_the_same_length_and_ignore_case() {
        assert_eq!(
            did_you_mean("modle", ["model", "mode", "tools"]),
            Some("model".into())
        );
        assert_eq!(
            did_you_mean("timeoutms", ["enabled", "timeoutMs"]),
            Some("timeoutMs".into())
        );
        assert_eq!(did_you_mean("zzz", ["model", "mode"]), None);
        assert_eq!(edit_distance("workspce", "workspace"), 1);
        assert_eq!(edit_distance("abc", "acb"), 1);
    }

    #[test]
    fn value_messages_read_expected_then_found() {
        assert_eq!(
            explain_value_message("unknown variant `x`, expected one of `ask`, `yolo`"),
            "expected one of ask, yolo (found `x`)"
        );
        assert_eq!(
            explain_value_message("invalid type: string \"yes\", expected a boolean"),
            "expected a boolean, found string \"yes\""
        );
        assert_eq!(
            explain_value_message("invalid type: string \"ten\", expected u32"),
            "expected a whole number (0 or more), found string \"ten\""
        );
        assert_eq!(
            explain_value_message("invalid value: integer `-1`, expected u32"),
            "expected a whole number (0 or more), found integer `-1`"
        );
    }
}
