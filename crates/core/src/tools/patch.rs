//! Patch text as models write it, parsed and applied in memory (no I/O): what `apply_patch`
//! runs on.
//!
//! Two formats are read:
//!
//! - OpenAI's patch envelope: `*** Begin Patch`, then file sections (`*** Add File: PATH` with
//!   `+` lines, `*** Delete File: PATH`, `*** Update File: PATH` with an optional
//!   `*** Move to: PATH` and hunks), then `*** End Patch`. A hunk starts with `@@` (optionally
//!   `@@ TEXT`, a line to find first, such as a function's signature) and holds context lines
//!   (` `), removed lines (`-`) and added lines (`+`); `*** End of File` anchors it at the end
//!   of the file. The first hunk of a section may leave out its `@@`.
//! - Unified diffs (`diff -u`, `git diff`): `--- a/PATH` / `+++ b/PATH` headers (`/dev/null` for
//!   an added or deleted file, two different names for a rename), `@@ -l,n +l,n @@` hunks,
//!   `\ No newline at end of file`. `diff --git`, `index`, mode lines and other chatter between
//!   files are skipped.
//!
//! - [`parse`] → [`Patch`] of [`FileOp`]s, or a [`ParseError`] naming the line and what was
//!   expected there.
//! - [`apply_hunks`]: a file's text (LF line endings) with an update's hunks applied, or a
//!   [`HunkError`] naming the hunk and why it does not apply. A hunk's old lines are looked for
//!   from where the previous hunk ended: exactly, then ignoring trailing whitespace, then
//!   ignoring surrounding whitespace (models often get indentation of blank lines wrong).

use std::fmt;

/// A parsed patch: its file operations in the order written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub files: Vec<FileOp>,
}

/// What a patch does to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
    /// Create `path` with `content` (LF line endings).
    Add { path: String, content: String },
    /// Delete `path`.
    Delete { path: String },
    /// Change `path` by `hunks`, then (when `move_to` is set) rename it.
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

impl FileOp {
    /// The path the operation names first (the source of a move).
    pub fn path(&self) -> &str {
        match self {
            FileOp::Add { path, .. } | FileOp::Delete { path } | FileOp::Update { path, .. } => {
                path
            }
        }
    }
}

/// One line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    Context(String),
    Remove(String),
    Add(String),
}

/// A run of changes in one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hunk {
    /// A line to find before the hunk's lines (OpenAI's `@@ TEXT`).
    pub anchor: Option<String>,
    /// Where the old lines start (1-based), from a unified header; a hint, not a requirement.
    pub old_start: Option<usize>,
    pub lines: Vec<HunkLine>,
    /// The hunk's old lines end the file (`*** End of File`).
    pub end_of_file: bool,
    /// The new side's last line has no line break (`\ No newline at end of file`).
    pub no_newline_at_end: bool,
}

impl Hunk {
    fn old(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|line| match line {
                HunkLine::Context(text) | HunkLine::Remove(text) => Some(text.as_str()),
                HunkLine::Add(_) => None,
            })
            .collect()
    }
}

/// Why patch text does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line} of the patch: {message}")]
pub struct ParseError {
    /// 1-based line of the patch text.
    pub line: usize,
    pub message: String,
}

fn error(line: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        line,
        message: message.into(),
    }
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE: &str = "*** Move to: ";
const END_OF_FILE: &str = "*** End of File";

/// Parses patch text in either format (see the module documentation).
pub fn parse(text: &str) -> Result<Patch, ParseError> {
    let text = text.replace("\r\n", "\n");
    let mut lines: Vec<&str> = text.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    let first = lines.iter().position(|line| !line.trim().is_empty());
    let Some(first) = first else {
        return Err(error(1, "the patch is empty"));
    };
    if lines[first].trim() == BEGIN {
        return parse_envelope(&lines, first);
    }
    if lines
        .iter()
        .any(|line| line.starts_with("--- ") || line.starts_with("+++ "))
    {
        return parse_unified(&lines);
    }
    Err(error(
        first + 1,
        format!(
            "expected `{BEGIN}` (then `*** Add File:`, `*** Update File:` or `*** Delete File:` \
             sections and `{END}`) or a unified diff (`--- a/PATH`, `+++ b/PATH`, `@@ -l,n +l,n \
             @@`); found `{}`",
            clip(lines[first])
        ),
    ))
}

/// A line shown in an error, cut to a readable length.
fn clip(line: &str) -> String {
    const MAX: usize = 80;
    if line.chars().count() <= MAX {
        return line.to_owned();
    }
    let cut: String = line.chars().take(MAX).collect();
    format!("{cut}…")
}

fn path_after<'a>(line: &'a str, prefix: &str, number: usize) -> Result<&'a str, ParseError> {
    let path = line[prefix.len()..].trim();
    if path.is_empty() {
        return Err(error(number, format!("`{}` names no file", prefix.trim())));
    }
    Ok(path)
}

fn parse_envelope(lines: &[&str], begin: usize) -> Result<Patch, ParseError> {
    let last = lines
        .iter()
        .rposition(|line| !line.trim().is_empty())
        .unwrap_or(begin);
    if last == begin || lines[last].trim() != END {
        return Err(error(
            last + 1,
            format!("the patch must end with `{END}` on its own line"),
        ));
    }
    let mut files = Vec::new();
    let mut i = begin + 1;
    while i < last {
        let line = lines[i];
        let number = i + 1;
        if line.trim().is_empty() {
            i += 1;
            continue;
        }
        if let Some(rest) = line.strip_prefix(ADD).map(|_| line) {
            let path = path_after(rest, ADD, number)?.to_owned();
            i += 1;
            let mut content = String::new();
            while i < last && !lines[i].starts_with("*** ") {
                let Some(added) = lines[i].strip_prefix('+') else {
                    return Err(error(
                        i + 1,
                        format!(
                            "every line of an added file starts with `+`; found `{}` in `{path}`",
                            clip(lines[i])
                        ),
                    ));
                };
                content.push_str(added);
                content.push('\n');
                i += 1;
            }
            files.push(FileOp::Add { path, content });
        } else if line.starts_with(DELETE) {
            let path = path_after(line, DELETE, number)?.to_owned();
            files.push(FileOp::Delete { path });
            i += 1;
        } else if line.starts_with(UPDATE) {
            let path = path_after(line, UPDATE, number)?.to_owned();
            i += 1;
            let mut move_to = None;
            if i < last && lines[i].starts_with(MOVE) {
                move_to = Some(path_after(lines[i], MOVE, i + 1)?.to_owned());
                i += 1;
            }
            let (hunks, next) = envelope_hunks(lines, i, last, &path)?;
            if hunks.is_empty() && move_to.is_none() {
                return Err(error(
                    number,
                    format!("`*** Update File: {path}` has no hunk (`@@` and its lines)"),
                ));
            }
            files.push(FileOp::Update {
                path,
                move_to,
                hunks,
            });
            i = next;
        } else {
            return Err(error(
                number,
                format!(
                    "expected `*** Add File: PATH`, `*** Update File: PATH`, `*** Delete File: \
                     PATH` or `{END}`; found `{}`",
                    clip(line)
                ),
            ));
        }
    }
    if files.is_empty() {
        return Err(error(begin + 1, "the patch changes no file"));
    }
    Ok(Patch { files })
}

/// The hunks of an update section starting at `start`; returns them and the index of the next
/// section's first line.
fn envelope_hunks(
    lines: &[&str],
    start: usize,
    last: usize,
    path: &str,
) -> Result<(Vec<Hunk>, usize), ParseError> {
    let mut hunks: Vec<Hunk> = Vec::new();
    let mut current: Option<Hunk> = None;
    let mut i = start;
    while i < last {
        let line = lines[i];
        if line.starts_with(END_OF_FILE) {
            let Some(hunk) = current.as_mut().filter(|h| !h.lines.is_empty()) else {
                return Err(error(
                    i + 1,
                    format!("`{END_OF_FILE}` follows no hunk lines in `{path}`"),
                ));
            };
            hunk.end_of_file = true;
            i += 1;
            continue;
        }
        if line.starts_with("*** ") {
            break;
        }
        if let Some(rest) = line.strip_prefix("@@") {
            if let Some(done) = current.take() {
                push_hunk(&mut hunks, done, i, path)?;
            }
            let anchor = rest.trim();
            current = Some(Hunk {
                anchor: (!anchor.is_empty()).then(|| anchor.to_owned()),
                ..Hunk::default()
            });
            i += 1;
            continue;
        }
        let hunk = current.get_or_insert_with(Hunk::default);
        if hunk.end_of_file {
            return Err(error(
                i + 1,
                format!(
                    "a hunk line follows `{END_OF_FILE}` in `{path}`; start a new hunk with `@@`"
                ),
            ));
        }
        let parsed = match line.chars().next() {
            None => HunkLine::Context(String::new()),
            Some(' ') => HunkLine::Context(line[1..].to_owned()),
            Some('-') => HunkLine::Remove(line[1..].to_owned()),
            Some('+') => HunkLine::Add(line[1..].to_owned()),
            Some(_) => {
                return Err(error(
                    i + 1,
                    format!(
                        "a hunk line of `{path}` starts with ` ` (context), `-` (removed) or `+` \
                         (added); found `{}`",
                        clip(line)
                    ),
                ));
            }
        };
        hunk.lines.push(parsed);
        i += 1;
    }
    if let Some(done) = current.take() {
        push_hunk(&mut hunks, done, i, path)?;
    }
    Ok((hunks, i))
}

fn push_hunk(hunks: &mut Vec<Hunk>, hunk: Hunk, line: usize, path: &str) -> Result<(), ParseError> {
    if hunk.lines.is_empty() {
        return Err(error(
            line,
            format!("hunk {} of `{path}` has no lines", hunks.len() + 1),
        ));
    }
    if !hunk
        .lines
        .iter()
        .any(|l| matches!(l, HunkLine::Add(_) | HunkLine::Remove(_)))
    {
        return Err(error(
            line,
            format!(
                "hunk {} of `{path}` changes nothing (no `-` or `+` line)",
                hunks.len() + 1
            ),
        ));
    }
    hunks.push(hunk);
    Ok(())
}

/// The path of a `---`/`+++` header: `None` for `/dev/null`; `a/`/`b/` and a timestamp after a
/// tab removed.
fn unified_path(rest: &str) -> Option<String> {
    let rest = rest.split('\t').next().unwrap_or(rest).trim();
    if rest == "/dev/null" {
        return None;
    }
    let rest = rest
        .strip_prefix("a/")
        .or_else(|| rest.strip_prefix("b/"))
        .unwrap_or(rest);
    Some(rest.to_owned())
}

/// `@@ -l,n +l,n @@` → (old start, old count, new count).
fn unified_header(line: &str) -> Option<(usize, usize, usize)> {
    let inner = line.strip_prefix("@@ ")?;
    let end = inner.find(" @@")?;
    let mut parts = inner[..end].split_whitespace();
    let range = |part: &str| -> Option<(usize, usize)> {
        match part.split_once(',') {
            Some((start, count)) => Some((start.parse().ok()?, count.parse().ok()?)),
            None => Some((part.parse().ok()?, 1)),
        }
    };
    let (old_start, old_count) = range(parts.next()?.strip_prefix('-')?)?;
    let (_, new_count) = range(parts.next()?.strip_prefix('+')?)?;
    Some((old_start, old_count, new_count))
}

fn parse_unified(lines: &[&str]) -> Result<Patch, ParseError> {
    let mut files = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(old_rest) = lines[i].strip_prefix("--- ") else {
            // `diff --git`, `index`, mode lines, prose between files.
            i += 1;
            continue;
        };
        let header = i + 1;
        let Some(new_rest) = lines.get(i + 1).and_then(|l| l.strip_prefix("+++ ")) else {
            return Err(error(
                header + 1,
                "a `--- PATH` header must be followed by a `+++ PATH` header",
            ));
        };
        let old = unified_path(old_rest);
        let new = unified_path(new_rest);
        i += 2;
        let name = new.as_deref().or(old.as_deref()).unwrap_or("?").to_owned();
        let mut hunks = Vec::new();
        while i < lines.len() && lines[i].starts_with("@@") {
            hunks.push(unified_hunk(lines, &mut i, hunks.len() + 1, &name)?);
        }
        files.push(unified_op(old, new, hunks, header)?);
    }
    if files.is_empty() {
        return Err(error(
            1,
            "the diff names no file (`--- a/PATH` / `+++ b/PATH`)",
        ));
    }
    Ok(Patch { files })
}

/// The hunk whose `@@` header is at `lines[*i]` (hunk `index` of file `name`), `*i` moved past
/// it and past a `\ No newline at end of file` after it.
fn unified_hunk(
    lines: &[&str],
    i: &mut usize,
    index: usize,
    name: &str,
) -> Result<Hunk, ParseError> {
    let number = *i + 1;
    let Some((old_start, old_count, new_count)) = unified_header(lines[*i]) else {
        return Err(error(
            number,
            format!(
                "expected a hunk header `@@ -START,COUNT +START,COUNT @@`; found `{}`",
                clip(lines[*i])
            ),
        ));
    };
    *i += 1;
    let mut hunk = Hunk {
        old_start: Some(old_start),
        ..Hunk::default()
    };
    let (mut old_seen, mut new_seen) = (0, 0);
    while old_seen < old_count || new_seen < new_count {
        let Some(line) = lines.get(*i) else {
            return Err(error(
                lines.len(),
                format!(
                    "hunk {index} of `{name}` ends early: its header announces {old_count} old \
                     and {new_count} new lines"
                ),
            ));
        };
        let parsed = match line.chars().next() {
            // A blank line: context whose single space an editor or a model dropped.
            None => HunkLine::Context(String::new()),
            Some(' ') => HunkLine::Context(line[1..].to_owned()),
            Some('-') => HunkLine::Remove(line[1..].to_owned()),
            Some('+') => HunkLine::Add(line[1..].to_owned()),
            Some('\\') => {
                *i += 1;
                continue;
            }
            Some(_) => {
                return Err(error(
                    *i + 1,
                    format!(
                        "hunk {index} of `{name}` ends early (its header announces {old_count} \
                         old and {new_count} new lines); found `{}`",
                        clip(line)
                    ),
                ));
            }
        };
        match &parsed {
            HunkLine::Context(_) => {
                old_seen += 1;
                new_seen += 1;
            }
            HunkLine::Remove(_) => old_seen += 1,
            HunkLine::Add(_) => new_seen += 1,
        }
        hunk.lines.push(parsed);
        *i += 1;
    }
    // `\ No newline at end of file` after the hunk's last new line.
    while *i < lines.len() && lines[*i].starts_with('\\') {
        if matches!(
            hunk.lines.last(),
            Some(HunkLine::Add(_) | HunkLine::Context(_))
        ) {
            hunk.no_newline_at_end = true;
        }
        *i += 1;
    }
    if old_count == 0 && old_start > 0 {
        // `-l,0`: the lines go after line l.
        hunk.old_start = Some(old_start + 1);
    }
    Ok(hunk)
}

/// What a file's headers and hunks do: add (from `/dev/null`), delete (to it), or update and
/// perhaps move.
fn unified_op(
    old: Option<String>,
    new: Option<String>,
    hunks: Vec<Hunk>,
    header: usize,
) -> Result<FileOp, ParseError> {
    Ok(match (old, new) {
        (None, None) => {
            return Err(error(header, "both headers name /dev/null"));
        }
        (None, Some(path)) => {
            let mut content = String::new();
            for hunk in &hunks {
                for line in &hunk.lines {
                    if let HunkLine::Add(text) | HunkLine::Context(text) = line {
                        content.push_str(text);
                        content.push('\n');
                    }
                }
            }
            if hunks.last().is_some_and(|h| h.no_newline_at_end) {
                content.pop();
            }
            FileOp::Add { path, content }
        }
        (Some(path), None) => FileOp::Delete { path },
        (Some(path), Some(new_path)) => {
            if hunks.is_empty() && path == new_path {
                return Err(error(
                    header,
                    format!("the diff of `{path}` has no hunk (`@@ -l,n +l,n @@`)"),
                ));
            }
            FileOp::Update {
                move_to: (new_path != path).then_some(new_path),
                path,
                hunks,
            }
        }
    })
}

/// Why a hunk does not apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HunkError {
    /// 1-based number of the hunk in its file's section.
    pub hunk: usize,
    pub why: String,
}

impl fmt::Display for HunkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hunk {} does not apply: {}", self.hunk, self.why)
    }
}

/// How strictly lines are compared, tried in order.
const MATCHES: [fn(&str, &str) -> bool; 3] = [
    |a, b| a == b,
    |a, b| a.trim_end() == b.trim_end(),
    |a, b| a.trim() == b.trim(),
];

/// The first position at or after `from` where `wanted` occurs in `lines` (at the end only, when
/// `at_end`), trying each comparison of [`MATCHES`] in turn.
fn seek(lines: &[&str], wanted: &[&str], from: usize, at_end: bool) -> Option<usize> {
    if wanted.len() > lines.len() {
        return None;
    }
    let last = lines.len() - wanted.len();
    for same in MATCHES {
        let fits = |start: usize| wanted.iter().zip(&lines[start..]).all(|(w, l)| same(l, w));
        if at_end {
            if last >= from && fits(last) {
                return Some(last);
            }
            continue;
        }
        if let Some(found) = (from..=last).find(|&start| fits(start)) {
            return Some(found);
        }
    }
    None
}

/// `text` (LF line endings) with `hunks` applied in order. Each hunk is looked for after the
/// previous one; a unified hunk's line number is a hint (the search starts a little before it
/// when the previous hunk ended earlier).
pub fn apply_hunks(text: &str, hunks: &[Hunk]) -> Result<String, HunkError> {
    let trailing_newline = text.is_empty() || text.ends_with('\n');
    let body = text.strip_suffix('\n').unwrap_or(text);
    let mut lines: Vec<String> = if text.is_empty() {
        Vec::new()
    } else {
        body.split('\n').map(str::to_owned).collect()
    };
    let mut cursor = 0usize;
    let mut no_newline = false;
    for (index, hunk) in hunks.iter().enumerate() {
        let number = index + 1;
        let view: Vec<&str> = lines.iter().map(String::as_str).collect();
        let mut from = cursor;
        if let Some(anchor) = &hunk.anchor {
            let found = seek(&view, &[anchor.as_str()], from, false).ok_or_else(|| HunkError {
                hunk: number,
                why: format!(
                    "its `@@ {}` line was not found{}",
                    clip(anchor),
                    after_line(from)
                ),
            })?;
            from = found + 1;
        }
        let old = hunk.old();
        let at = if old.is_empty() {
            // Only added lines: at the unified header's line, else at the end of the file.
            match hunk.old_start {
                Some(start) if !hunk.end_of_file => start.saturating_sub(1).clamp(from, view.len()),
                _ => view.len(),
            }
        } else {
            let hinted = hunk
                .old_start
                .map(|start| start.saturating_sub(1))
                .filter(|&start| start > from)
                .and_then(|start| seek(&view, &old, start, hunk.end_of_file));
            hinted
                .or_else(|| seek(&view, &old, from, hunk.end_of_file))
                .ok_or_else(|| HunkError {
                    hunk: number,
                    why: not_found(&view, &old, from, hunk.end_of_file),
                })?
        };
        let replaced = old.len();
        // Context lines keep the file's own text (the patch's may differ in whitespace).
        let mut kept = at;
        let mut new: Vec<String> = Vec::with_capacity(hunk.lines.len());
        for line in &hunk.lines {
            match line {
                HunkLine::Context(text) => {
                    new.push(lines.get(kept).cloned().unwrap_or_else(|| text.clone()));
                    kept += 1;
                }
                HunkLine::Remove(_) => kept += 1,
                HunkLine::Add(text) => new.push(text.clone()),
            }
        }
        let added = new.len();
        lines.splice(at..at + replaced, new);
        cursor = at + added;
        if hunk.no_newline_at_end && cursor == lines.len() {
            no_newline = true;
        }
    }
    let mut out = lines.join("\n");
    if !lines.is_empty() && trailing_newline && !no_newline {
        out.push('\n');
    }
    Ok(out)
}

fn after_line(from: usize) -> String {
    if from == 0 {
        String::new()
    } else {
        format!(" after line {from} (where the previous hunk ended)")
    }
}

/// Why a hunk's old lines were not found: the first of them that does not occur, or the text
/// as a whole.
fn not_found(lines: &[&str], old: &[&str], from: usize, at_end: bool) -> String {
    let expected = old.first().copied().unwrap_or_default();
    let missing = old.iter().find(|wanted| {
        !lines[from.min(lines.len())..]
            .iter()
            .any(|line| line.trim() == wanted.trim())
    });
    let place = if at_end {
        " at the end of the file".to_owned()
    } else {
        after_line(from)
    };
    match missing {
        Some(line) => format!(
            "its line `{}` is not in the file{place}; read the file again and copy its context \
             and `-` lines exactly",
            clip(line)
        ),
        None => format!(
            "its {} context and `-` lines (starting `{}`) do not occur together, in this order, \
             {}; read the file again and copy them exactly",
            old.len(),
            clip(expected),
            if place.is_empty() {
                "in the file".to_owned()
            } else {
                place.trim_start().to_owned()
            }
        ),
    }
}

#[cfg(test)]
mod tests;
