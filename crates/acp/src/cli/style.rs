//! How the terminal commands draw things for a person: colour when writing to a terminal, and
//! the width to wrap diffs at.

use keel_diff::{FileDiff, TerminalStyle};

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
