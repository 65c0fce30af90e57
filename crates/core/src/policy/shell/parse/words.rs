//! Words as bash reads them: quote removal, tilde and pathname expansion, redirections.

use std::path::Path;

use tree_sitter::Node;

use super::super::glob::{self, Char};
use super::super::{Cwd, Place, Redirect, is_harmless_device};
use super::{Analyzer, describe};
use crate::tool::view::code;

impl Analyzer<'_, '_> {
    /// A word after tilde and pathname expansion, as bash expands it (without `nullglob` or
    /// `failglob`: a pattern that matches nothing stays as written, its quotes removed). What
    /// Keel does not expand the way bash would leaves the line unrenderable.
    pub(super) fn expand(&mut self, word: Word) -> Vec<String> {
        if word.dynamic {
            return vec![word.text()];
        }
        let mut chars = word.chars;
        if let Some(&('~', true)) = chars.first() {
            let end = chars
                .iter()
                .position(|&(c, _)| c == '/')
                .unwrap_or(chars.len());
            match (end, self.context.home.and_then(Path::to_str)) {
                (1, Some(home)) => {
                    let mut with_home: Vec<Char> = home.chars().map(|c| (c, false)).collect();
                    with_home.extend_from_slice(&chars[1..]);
                    chars = with_home;
                }
                (1, None) => self.unrenderable("`~` without a known home directory"),
                _ => self.unrenderable("`~user`, `~+` or `~-`"),
            }
        } else if tilde_in_assignment(&chars) {
            self.unrenderable("a `~` after `=` or `:` in an argument shaped like an assignment");
        }
        let text: String = chars.iter().map(|&(c, _)| c).collect();
        if glob::is_pattern(&chars) && self.posix {
            // dash's dialect differs (`[^x]`, `.*` matching `..`): left to the checks that
            // read a pattern under both.
            self.unrenderable(format!(
                "a pattern in a script for `sh` ({text})",
                text = code(&text)
            ));
        } else if glob::is_pattern(&chars) {
            match &self.cwd {
                Cwd::Known(dir) => match glob::expand(&chars, dir) {
                    Ok(Some(found)) => return found,
                    Ok(None) => {}
                    Err(reason) => {
                        self.unrenderable(format!("{reason} (in {text})", text = code(&text)))
                    }
                },
                Cwd::Unknown => {
                    self.unrenderable("a pattern where the working directory is not known")
                }
            }
        }
        vec![text]
    }

    pub(super) fn redirect(
        &mut self,
        node: Node<'_>,
        src: &str,
        depth: usize,
        words: &mut Vec<Word>,
    ) -> Option<Redirect> {
        match node.kind() {
            "heredoc_redirect" => {
                self.not_plain("a here-document (`<<`)");
                self.opaque(&src[node.byte_range()]);
                self.harvest(node, src, depth);
                return None;
            }
            "herestring_redirect" => {
                self.not_plain("a here-string (`<<<`)");
                self.opaque(&src[node.byte_range()]);
                return None;
            }
            _ => {}
        }
        let mut operator = String::new();
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            if !child.is_named() {
                operator.push_str(child.kind());
            }
        }
        let descriptor = node
            .child_by_field_name("descriptor")
            .map(|d| src[d.byte_range()].to_owned());
        let mut cursor = node.walk();
        let destinations: Vec<Node<'_>> = node
            .children_by_field_name("destination", &mut cursor)
            .collect();
        let mut target = String::new();
        let mut dynamic = false;
        for (i, destination) in destinations.iter().enumerate() {
            let value = self.word(*destination, src, depth);
            if i == 0 {
                if !value.dynamic
                    && (glob::is_pattern(&value.chars) || value.chars.first() == Some(&('~', true)))
                {
                    self.unrenderable("a pattern or `~` in a redirection's target");
                }
                target = value.text();
                dynamic = value.dynamic;
            } else {
                // `cmd > file arg`: the extra words are arguments.
                words.push(value);
            }
        }
        let duplicate = (operator == ">&" || operator == "<&")
            && (target == "-" || target.chars().all(|c| c.is_ascii_digit()));
        let redirect = Redirect {
            operator,
            descriptor,
            target,
            duplicate,
            dynamic,
        };
        if !redirect.duplicate && !dynamic && !is_harmless_device(&redirect.target) {
            let place = self.context.place(&redirect.target, &self.cwd);
            if !matches!(place, Place::Inside(_)) {
                let shown = place
                    .path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| redirect.target.clone());
                self.not_plain(format!(
                    "a redirection to {shown}, outside the workspace",
                    shown = code(&shown)
                ));
            }
        }
        Some(redirect)
    }

    /// A word, each character marked quoted or not, and whether it holds an expansion or
    /// substitution.
    pub(super) fn word(&mut self, node: Node<'_>, src: &str, depth: usize) -> Word {
        self.nested(|walk| walk.walk_word(node, src, depth))
            .unwrap_or_else(|| Word::quoted(&src[node.byte_range()], true))
    }

    fn walk_word(&mut self, node: Node<'_>, src: &str, depth: usize) -> Word {
        let text = &src[node.byte_range()];
        match node.kind() {
            "word" => {
                if is_brace_expansion(text) {
                    self.not_plain("a brace expansion (`{a,b}`)");
                    return Word::quoted(text, true);
                }
                Word {
                    chars: unescape_bare(text),
                    dynamic: false,
                }
            }
            "number" => Word {
                chars: text.chars().map(|c| (c, true)).collect(),
                dynamic: false,
            },
            "raw_string" => Word::quoted(
                text.strip_prefix('\'')
                    .and_then(|t| t.strip_suffix('\''))
                    .unwrap_or(text),
                false,
            ),
            "string" => {
                let mut value = Word::default();
                let mut cursor = node.walk();
                for child in node.named_children(&mut cursor) {
                    if child.kind() == "string_content" {
                        let content = unescape_double(&src[child.byte_range()]);
                        value.chars.extend(content.chars().map(|c| (c, false)));
                    } else {
                        let inner = self.word(child, src, depth);
                        value
                            .chars
                            .extend(inner.chars.iter().map(|&(c, _)| (c, false)));
                        value.dynamic = true;
                    }
                }
                value
            }
            "concatenation" => {
                let mut value = Word::default();
                let mut cursor = node.walk();
                for child in node.named_children(&mut cursor) {
                    let inner = self.word(child, src, depth);
                    value.chars.extend(inner.chars);
                    value.dynamic |= inner.dynamic;
                }
                if !value.dynamic && is_brace_expansion(text) {
                    self.not_plain("a brace expansion (`{a,b}`)");
                    value.dynamic = true;
                }
                value
            }
            kind => {
                let reason = match kind {
                    "command_substitution" if text.starts_with('`') => {
                        "command substitution with backticks".to_owned()
                    }
                    "command_substitution" => "command substitution `$(...)`".to_owned(),
                    "process_substitution" => "process substitution `<(...)`".to_owned(),
                    "simple_expansion" | "expansion" => {
                        format!("the expansion {text}", text = code(text))
                    }
                    "arithmetic_expansion" => "an arithmetic expansion `$((...))`".to_owned(),
                    "ansi_c_string" => "ANSI-C quoting `$'...'`".to_owned(),
                    "brace_expression" => "a brace expansion (`{a..b}`)".to_owned(),
                    other => describe(other),
                };
                self.not_plain(reason);
                self.opaque(text);
                self.harvest(node, src, depth);
                Word::quoted(text, true)
            }
        }
    }
}

/// A word as the analysis reads it.
#[derive(Debug, Default)]
pub(super) struct Word {
    /// Each character after quote removal, and whether it was unquoted.
    pub(super) chars: Vec<Char>,
    /// It holds an expansion or substitution.
    pub(super) dynamic: bool,
}

impl Word {
    pub(super) fn quoted(text: &str, dynamic: bool) -> Self {
        Word {
            chars: text.chars().map(|c| (c, false)).collect(),
            dynamic,
        }
    }

    pub(super) fn text(&self) -> String {
        self.chars.iter().map(|&(c, _)| c).collect()
    }
}

/// Whether bash would expand a `~` inside this word: an argument shaped like an assignment
/// (`NAME=...`) gets tilde expansion after its `=` and after each `:`.
fn tilde_in_assignment(chars: &[Char]) -> bool {
    let Some(equals) = chars.iter().position(|&(c, _)| c == '=') else {
        return false;
    };
    let name = &chars[..equals];
    let is_name = name
        .first()
        .is_some_and(|&(c, a)| a && (c.is_ascii_alphabetic() || c == '_'))
        && name
            .iter()
            .all(|&(c, a)| a && (c.is_ascii_alphanumeric() || c == '_'));
    is_name
        && chars[equals..]
            .windows(2)
            .any(|pair| matches!(pair[0].0, '=' | ':') && pair[1] == ('~', true))
}

fn is_brace_expansion(text: &str) -> bool {
    text.find('{').is_some_and(|open| {
        text[open..].find('}').is_some_and(|close| {
            let inner = &text[open + 1..open + close];
            inner.contains(',') || inner.contains("..")
        })
    })
}

/// A bare word's characters, backslashes removed (the character after one is quoted; a
/// backslash-newline is a line continuation and disappears).
fn unescape_bare(text: &str) -> Vec<Char> {
    let mut out = Vec::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\n') | None => {}
                Some(next) => out.push((next, false)),
            }
        } else {
            out.push((c, true));
        }
    }
    out
}

fn unescape_double(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('"' | '\\' | '$' | '`') => {
                    if let Some(next) = chars.next() {
                        out.push(next);
                    }
                }
                Some('\n') => {
                    chars.next();
                }
                _ => out.push(c),
            }
        } else {
            out.push(c);
        }
    }
    out
}
