//! How the terminal commands draw things for a person: colour when writing to a terminal, the
//! width to wrap diffs at, and a tool call's one-line title.

use keel_diff::{FileDiff, TerminalStyle};
use serde_json::Value;

/// Colour and width for one output stream.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
    pub width: usize,
}

impl Style {
    /// Colour only on a terminal, and only when `NO_COLOR` is unset; width from `COLUMNS`.
    pub fn for_stream(is_terminal: bool) -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let width = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse::<usize>().ok())
            .filter(|w| *w >= 20)
            .unwrap_or(100);
        Self {
            color: is_terminal && !no_color,
            width,
        }
    }

    /// `text` in bold (on a colour terminal).
    pub fn bold(&self, text: &str) -> String {
        self.paint("1", text)
    }

    /// `text` dimmed.
    pub fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }

    /// `text` in red.
    pub fn red(&self, text: &str) -> String {
        self.paint("31", text)
    }

    /// `text` in green.
    pub fn green(&self, text: &str) -> String {
        self.paint("32", text)
    }

    /// `text` in cyan.
    pub fn cyan(&self, text: &str) -> String {
        self.paint("36", text)
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// A file change drawn by keel-diff's terminal renderer (or a note when it cannot be).
    pub fn diff(&self, path: &str, old: Option<&str>, new: &str) -> String {
        match FileDiff::compute(path, old.map(str::as_bytes), Some(new.as_bytes())) {
            Ok(diff) => diff.render_terminal(&TerminalStyle {
                color: self.color,
                width: self.width,
                tab_width: 4,
            }),
            Err(e) => format!("({e})\n"),
        }
    }
}

/// A short title for a call: `read greet.py`, `bash sh test.sh`, `grep "fn main"`.
pub fn call_title(tool: &str, args: &Value) -> String {
    const SUBJECT_KEYS: &[&str] = &[
        "command",
        "file_path",
        "path",
        "pattern",
        "url",
        "query",
        "description",
    ];
    let subject = SUBJECT_KEYS
        .iter()
        .find_map(|key| args.get(*key).and_then(Value::as_str));
    match subject {
        Some(subject) => {
            let first_line = subject.lines().next().unwrap_or_default();
            let short: String = first_line.chars().take(80).collect();
            let cut = short.len() < first_line.len() || subject.lines().nth(1).is_some();
            format!("{tool} {short}{}", if cut { "…" } else { "" })
        }
        None => tool.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_name_the_subject() {
        assert_eq!(
            call_title("read", &serde_json::json!({"file_path": "a.rs"})),
            "read a.rs"
        );
        assert_eq!(
            call_title("bash", &serde_json::json!({"command": "ls\nrm x"})),
            "bash ls…"
        );
        assert_eq!(
            call_title("todo", &serde_json::json!({"todos": []})),
            "todo"
        );
    }
}
