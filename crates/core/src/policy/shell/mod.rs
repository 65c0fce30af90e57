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
pub mod glob;
mod parse;
mod render;

use std::path::PathBuf;

pub use context::{Place, ShellContext, confusable_char, is_harmless_device, normalize};
pub use render::{quote, render};

use super::grammar::Fit;
use super::pattern::base_name;

/// How deep `sh -c "sh -c '...'"` nesting is followed.
pub const MAX_NESTING: usize = 4;

/// Longest command line that is parsed. A longer one is not plain, and the watchdog escalates
/// it (ask; denied without a user, also in `yolo`).
pub const MAX_SCRIPT_BYTES: usize = 128 * 1024;

/// Most words a line may hold (over all its simple commands); more is too complex.
pub const MAX_LINE_WORDS: usize = 8192;

/// How much of a line too complex to analyse the watchdog still scans as text.
pub const MAX_OPAQUE_SCAN_BYTES: usize = 4 * 1024;

/// Deepest nesting (brackets, quotes-in-substitutions, compound keywords) in the raw text
/// before it is parsed, and deepest recursion of the walk over the syntax tree.
pub const MAX_SYNTAX_DEPTH: usize = 256;

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
    /// The file descriptor written before the operator (`2` in `2>&1`).
    pub descriptor: Option<String>,
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
    /// The approval key (`None` for containers and for calls outside their grammar).
    pub key: Option<String>,
    /// How the peeled argv fits the allowlisted grammars.
    pub fit: Fit,
    /// For `cd`: the directory it moves to, as bash's logical `cd` names it (absolute,
    /// symlinks kept, `..` applied to the text); `None` when unknown or for other commands.
    pub directory: Option<PathBuf>,
    /// For a nested shell (`sh -c SCRIPT`): Keel's rendering of the script it runs.
    pub nested_script: Option<String>,
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
    /// The operators between the stages (`|` or `|&`), one fewer than the stages.
    pub pipes: Vec<String>,
    /// The list operator before this pipeline (`&&`, `||`, `;`, a newline); empty for the
    /// first.
    pub joiner: String,
    /// How deeply the script it belongs to is nested (`sh -c '...'`: 1); 0 for the line.
    pub depth: usize,
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
    /// Why the line was too large or too deeply nested to analyse in full (the watchdog
    /// escalates it).
    pub too_complex: Option<String>,
    /// Why Keel cannot run the line from its own rendering of this analysis
    /// ([`render`]): a construct the renderer does not reproduce (a negation, a pattern Keel
    /// does not expand as bash would, `~user`, ...). Empty when it can.
    pub unrenderable: Vec<String>,
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
    parse::run(script, context, context.start())
}

/// Analyses a command line that starts in `start` (the tool's `cwd`, resolved as the tool
/// resolves it), not in the primary root.
pub fn analyze_from(script: &str, context: &ShellContext<'_>, start: Cwd) -> ShellAnalysis {
    parse::run(script, context, start)
}

/// The longest prefix of `text` of at most `max` bytes, on a character boundary.
pub fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// How deeply the raw text nests, counted without parsing (an over-estimate: brackets inside
/// quotes count too), stopping once past `limit`.
pub fn nesting_depth(text: &str, limit: usize) -> usize {
    let mut depth: usize = 0;
    let mut deepest = 0;
    let mut word = String::new();
    let keyword = |word: &mut String, depth: &mut usize| {
        match word.as_str() {
            "if" | "case" | "for" | "while" | "until" | "select" | "function" => *depth += 1,
            "fi" | "esac" | "done" => *depth = depth.saturating_sub(1),
            _ => {}
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphabetic() {
            if word.len() < 16 {
                word.push(c);
            }
            continue;
        }
        keyword(&mut word, &mut depth);
        match c {
            '(' | '{' | '[' | '`' => depth += 1,
            ')' | '}' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        deepest = deepest.max(depth);
        if deepest > limit {
            return deepest;
        }
    }
    keyword(&mut word, &mut depth);
    deepest.max(depth)
}

#[cfg(test)]
mod tests;
