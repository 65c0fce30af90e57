//! Shell command lines, parsed for real with tree-sitter-bash.
//!
//! [`analyze`] turns a command line into a [`ShellAnalysis`]: its [`Pipeline`]s of
//! [`SimpleCommand`]s (wrappers peeled, `sh -c` scripts analysed in place, the working
//! directory tracked through `cd`), and whether the line is *plain*. A plain line is a list of
//! simple commands joined by `&&`, `||`, `;`, `|`, whose words are literal (quoted or not), with
//! redirections only to files inside the workspace (or `/dev/null`) and file-descriptor
//! duplications. Only a plain line gets approval keys; anything else (substitutions,
//! expansions, here-documents, subshells, functions, loops, background jobs, inline code, a parse
//! error, ...) is asked every time, and its text is handed to the watchdog's scan.
//!
//! Commands are extracted from non-plain lines too (best effort), so deny rules and the
//! watchdog still see them.

mod context;
mod parse;

use std::path::PathBuf;

pub use context::{Place, ShellContext, confusable_char, is_harmless_device, normalize};

use super::pattern::base_name;

/// How deep `sh -c "sh -c '...'"` nesting is followed.
pub const MAX_NESTING: usize = 4;

/// Where a command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cwd {
    Known(PathBuf),
    /// After `cd $X`, `cd -`, `popd`: relative paths can no longer be placed.
    Unknown,
}

/// One redirection of a simple command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// `>`, `>>`, `<`, `&>`, `>&`, ...
    pub operator: String,
    pub target: String,
    /// `2>&1`, `>&-`: a file-descriptor duplication, no file involved.
    pub duplicate: bool,
    /// The target holds an expansion.
    pub dynamic: bool,
}

impl Redirect {
    /// Whether the redirection writes to a file.
    pub fn writes(&self) -> bool {
        !self.duplicate && self.operator.contains('>')
    }

    pub fn reads(&self) -> bool {
        !self.duplicate && self.operator.contains('<')
    }
}

/// A simple command, as written and peeled.
#[derive(Debug, Clone, PartialEq)]
pub struct SimpleCommand {
    /// The words as written (after leading `NAME=value` assignments).
    pub original: Vec<String>,
    /// The command that does the work (wrappers peeled).
    pub argv: Vec<String>,
    pub wrappers: Vec<String>,
    /// Leading `NAME=value` words and `env NAME=value` pairs.
    pub assignments: Vec<(String, String)>,
    pub redirects: Vec<Redirect>,
    pub cwd: Cwd,
    /// A word holds an expansion or a substitution.
    pub dynamic: bool,
    /// A `sh -c` whose script was analysed in its place (it has no key of its own).
    pub container: bool,
    /// Code handed to an interpreter, `eval`, awk or sed.
    pub inline_code: Vec<String>,
    /// The approval key (`None` for containers).
    pub key: Option<String>,
}

impl SimpleCommand {
    /// The peeled command as one line (words joined by spaces), what rule patterns match.
    pub fn text(&self) -> String {
        self.argv.join(" ")
    }

    pub fn program(&self) -> &str {
        self.argv.first().map(|p| base_name(p)).unwrap_or("")
    }
}

/// Commands joined by `|`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pipeline {
    pub stages: Vec<SimpleCommand>,
}

/// A command line, analysed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShellAnalysis {
    pub pipelines: Vec<Pipeline>,
    /// Why the line is not plain; empty when it is.
    pub not_plain: Vec<String>,
    /// Text the watchdog scans as raw text: the whole line when it is not plain, inline code,
    /// nested scripts that did not parse.
    pub opaque: Vec<String>,
}

impl ShellAnalysis {
    pub fn is_plain(&self) -> bool {
        self.not_plain.is_empty()
    }

    pub fn commands(&self) -> impl Iterator<Item = &SimpleCommand> {
        self.pipelines.iter().flat_map(|p| p.stages.iter())
    }

    /// The approval keys, one per distinct simple command, in order. Empty when not plain.
    pub fn keys(&self) -> Vec<String> {
        if !self.is_plain() {
            return Vec::new();
        }
        let mut keys: Vec<String> = Vec::new();
        for key in self.commands().filter_map(|c| c.key.clone()) {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }
}

/// Analyses a command line.
pub fn analyze(script: &str, context: &ShellContext<'_>) -> ShellAnalysis {
    parse::run(script, context)
}

#[cfg(test)]
mod tests;
