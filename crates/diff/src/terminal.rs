//! The terminal rendering: gutter, colour, word emphasis, wrapping.

use std::ops::Range;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use similar::{DiffOp, InlineChangeOptions, TextDiff};
use unicode_width::UnicodeWidthChar;

use crate::model::{Change, FileDiff, Hunk, Line, LineKind, visible_crlf};
use crate::unified::CR_MARKER;

/// How [`FileDiff::render_terminal`] lays out its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalStyle {
    /// Emit ANSI colour and emphasis. When false the output contains no escape codes at all.
    pub color: bool,
    /// Total width in columns; long lines wrap to fit. `0` means never wrap. The text column
    /// is never made narrower than 10 columns, however small the width.
    pub width: usize,
    /// Columns per tab stop; tabs expand to spaces. `0` counts as 1.
    pub tab_width: usize,
}

impl Default for TerminalStyle {
    /// Plain, 80 columns, tabs of 4.
    fn default() -> Self {
        TerminalStyle {
            color: false,
            width: 80,
            tab_width: 4,
        }
    }
}

/// Time all word-level emphasis of one rendering may take; after it, lines are shown
/// without emphasis.
const EMPHASIS_TIME_LIMIT: Duration = Duration::from_millis(100);
/// Runs of changed lines larger than this (bytes, both sides) get no word emphasis: a rewrite
/// that size reads better as plain removed and added lines.
const EMPHASIS_MAX_BYTES: usize = 64 * 1024;
const MIN_TEXT_WIDTH: usize = 10;
/// Shown under a line that has no line ending, as git does.
const NO_NEWLINE: &str = "\\ No newline at end of file";

const RESET: &str = "\x1b[0m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const CYAN: &str = "\x1b[36m";
const RED_EMPHASIS: &str = "\x1b[1;7;31m";
const GREEN_EMPHASIS: &str = "\x1b[1;7;32m";
const RED_DIM: &str = "\x1b[2;31m";
const GREEN_DIM: &str = "\x1b[2;32m";

/// How a piece of line text is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ink {
    Plain,
    /// A word that changed within a changed line.
    Emphasis,
    /// Something the renderer added, like the `␍` ending marker.
    Marker,
}

impl FileDiff {
    /// The diff for a person at a terminal.
    ///
    /// A header line with the path (`from → to` for a rename) and `+N −M`, then each hunk's
    /// lines under a gutter of old and new line numbers, hunks separated by a `⋮` line.
    ///
    /// With colour, removed lines are red and added lines green, and the words that changed
    /// within a replaced line are bold and reversed (word diff by similar's inline changes).
    /// Without it the output has no escape codes at all.
    ///
    /// Long lines wrap to [`TerminalStyle::width`] by display width, continuation rows with a
    /// blank gutter; tabs expand to [`TerminalStyle::tab_width`]. A last line without a line
    /// ending is followed by git's `\ No newline at end of file`, and where a run of changed
    /// lines mixes `\r\n` with other endings the `\r\n` lines end in `␍`. Control characters
    /// (escape sequences in the file included) are drawn as Unicode control pictures, and
    /// bidirectional overrides as U+FFFD, so file content can never drive the terminal.
    pub fn render_terminal(&self, style: &TerminalStyle) -> String {
        let mut out = String::new();
        let paint = Paint { color: style.color };
        self.write_header(&mut out, paint);
        if self.hunks.is_empty() {
            return out;
        }
        let number_width = self
            .hunks
            .iter()
            .flat_map(|hunk| &hunk.lines)
            .flat_map(|line| [line.old_number, line.new_number])
            .flatten()
            .max()
            .unwrap_or(0)
            .to_string()
            .len();
        let layout = Layout {
            number_width,
            text_width: match style.width {
                0 => None,
                width => Some(
                    width
                        .saturating_sub(2 * number_width + 4)
                        .max(MIN_TEXT_WIDTH),
                ),
            },
            tab_width: style.tab_width.max(1),
            paint,
        };
        let deadline = Instant::now() + EMPHASIS_TIME_LIMIT;
        for (index, hunk) in self.hunks.iter().enumerate() {
            if index > 0 {
                out.push_str(&" ".repeat(2 * number_width + 2));
                paint.push(&mut out, CYAN, "⋮");
                out.push('\n');
            }
            layout.write_hunk(&mut out, hunk, style.color.then_some(deadline));
        }
        out
    }

    fn write_header(&self, out: &mut String, paint: Paint) {
        let path = match &self.change {
            Change::Rename { from } => format!("{from} → {}", self.path),
            _ => self.path.clone(),
        };
        paint.push(out, BOLD, &sanitize(&path));
        if self.is_empty() {
            paint.push(out, DIM, " (no changes)");
            out.push('\n');
            return;
        }
        out.push(' ');
        paint.push(out, GREEN, &format!("+{}", self.added));
        out.push(' ');
        paint.push(out, RED, &format!("−{}", self.removed));
        let note = match self.change {
            Change::Create => " (new file)",
            Change::Delete => " (deleted)",
            Change::Modify | Change::Rename { .. } => "",
        };
        paint.push(out, DIM, note);
        if self.lossy {
            paint.push(out, DIM, " (not valid UTF-8, shown lossily)");
        }
        out.push('\n');
    }
}

#[derive(Debug, Clone, Copy)]
struct Paint {
    color: bool,
}

impl Paint {
    /// Pushes `text`, wrapped in `sgr` and a reset when colouring.
    fn push(self, out: &mut String, sgr: &str, text: &str) {
        if text.is_empty() {
            return;
        }
        if self.color && !sgr.is_empty() {
            out.push_str(sgr);
            out.push_str(text);
            out.push_str(RESET);
        } else {
            out.push_str(text);
        }
    }
}

struct Layout {
    number_width: usize,
    /// Columns for line text, `None` for no wrapping.
    text_width: Option<usize>,
    tab_width: usize,
    paint: Paint,
}

impl Layout {
    fn write_hunk(&self, out: &mut String, hunk: &Hunk, emphasis_deadline: Option<Instant>) {
        let marks = visible_crlf(&hunk.lines);
        let emphasis = match emphasis_deadline {
            Some(deadline) => word_emphasis(&hunk.lines, deadline),
            None => vec![Vec::new(); hunk.lines.len()],
        };
        for ((line, marked), emphasized) in hunk.lines.iter().zip(marks).zip(emphasis) {
            self.write_line(out, line, marked, &emphasized);
        }
    }

    fn write_line(&self, out: &mut String, line: &Line, marked: bool, emphasized: &[Range<usize>]) {
        let (sign, sgr, emphasis_sgr, marker_sgr) = match line.kind {
            LineKind::Context => (' ', "", "", DIM),
            LineKind::Removed => ('-', RED, RED_EMPHASIS, RED_DIM),
            LineKind::Added => ('+', GREEN, GREEN_EMPHASIS, GREEN_DIM),
        };
        let rows = self.wrap(line, marked, emphasized);
        for (row_index, row) in rows.iter().enumerate() {
            let gutter = if row_index == 0 {
                let number = |n: Option<usize>| n.map(|n| n.to_string()).unwrap_or_default();
                format!(
                    "{:>w$} {:>w$} │",
                    number(line.old_number),
                    number(line.new_number),
                    w = self.number_width
                )
            } else {
                self.blank_gutter()
            };
            self.paint.push(out, DIM, &gutter);
            let sign = if row_index == 0 { sign } else { ' ' };
            // No trailing blank after the gutter of an empty context line.
            if sign != ' ' || !row.is_empty() {
                self.paint.push(out, sgr, &sign.to_string());
            }
            for (ink, text) in row {
                let ink_sgr = match ink {
                    Ink::Plain => sgr,
                    Ink::Emphasis => emphasis_sgr,
                    Ink::Marker => marker_sgr,
                };
                self.paint.push(out, ink_sgr, text);
            }
            out.push('\n');
        }
        if line.no_newline_at_end {
            self.paint.push(out, DIM, &self.blank_gutter());
            out.push(' ');
            self.paint.push(out, marker_sgr, NO_NEWLINE);
            out.push('\n');
        }
    }

    fn blank_gutter(&self) -> String {
        format!("{:w$} │", "", w = 2 * self.number_width + 1)
    }

    /// Splits a line's display text into rows of at most `text_width` columns.
    fn wrap(
        &self,
        line: &Line,
        marked: bool,
        emphasized: &[Range<usize>],
    ) -> Vec<Vec<(Ink, String)>> {
        let mut rows = Rows {
            rows: vec![Vec::new()],
            row_width: 0,
            text_width: self.text_width,
        };
        let mut column = 0;
        let mut emphasis = emphasized.iter().peekable();
        for (offset, ch) in line.text.char_indices() {
            while emphasis.next_if(|range| range.end <= offset).is_some() {}
            let ink = match emphasis.peek() {
                Some(range) if range.start <= offset => Ink::Emphasis,
                _ => Ink::Plain,
            };
            if ch == '\t' {
                let spaces = self.tab_width - column % self.tab_width;
                for _ in 0..spaces {
                    rows.push(ink, ' ', 1);
                }
                column += spaces;
                continue;
            }
            let shown = display_char(ch);
            let width = shown.width().unwrap_or(0);
            rows.push(ink, shown, width);
            column += width;
        }
        if marked {
            rows.push(Ink::Marker, CR_MARKER, 1);
        }
        rows.rows
    }
}

struct Rows {
    rows: Vec<Vec<(Ink, String)>>,
    row_width: usize,
    text_width: Option<usize>,
}

impl Rows {
    fn push(&mut self, ink: Ink, ch: char, width: usize) {
        let full = self
            .text_width
            .is_some_and(|limit| self.row_width > 0 && self.row_width + width > limit);
        if full {
            self.rows.push(Vec::new());
            self.row_width = 0;
        }
        self.row_width += width;
        let Some(row) = self.rows.last_mut() else {
            return;
        };
        match row.last_mut() {
            Some((last_ink, text)) if *last_ink == ink => text.push(ch),
            _ => row.push((ink, ch.to_string())),
        }
    }
}

/// The character drawn for `ch`: control characters become visible pictures, and characters
/// that could reorder or hijack terminal output become U+FFFD.
fn display_char(ch: char) -> char {
    match ch {
        '\u{0}'..='\u{1f}' => char::from_u32(0x2400 + u32::from(ch)).unwrap_or('\u{fffd}'),
        '\u{7f}' => '\u{2421}',
        '\u{80}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => '\u{fffd}',
        _ => ch,
    }
}

fn sanitize(text: &str) -> String {
    text.chars().map(display_char).collect()
}

/// For each line of a hunk, the byte ranges of its text to emphasize: the words that differ
/// between the removed and added lines of each run of changes.
fn word_emphasis(lines: &[Line], deadline: Instant) -> Vec<Vec<Range<usize>>> {
    let mut emphasis = vec![Vec::new(); lines.len()];
    let mut start = 0;
    while start < lines.len() {
        let run_len = lines[start..]
            .iter()
            .take_while(|line| line.kind != LineKind::Context)
            .count();
        if run_len == 0 {
            start += 1;
            continue;
        }
        let run = &lines[start..start + run_len];
        let removed = run
            .iter()
            .take_while(|line| line.kind == LineKind::Removed)
            .count();
        let bytes: usize = run.iter().map(|line| line.text.len()).sum();
        if removed > 0 && removed < run_len && bytes <= EMPHASIS_MAX_BYTES {
            let (old, new) = run.split_at(removed);
            let ranges = run_emphasis(old, new, deadline);
            for (slot, ranges) in emphasis[start..start + run_len].iter_mut().zip(ranges) {
                *slot = ranges;
            }
        }
        start += run_len;
    }
    emphasis
}

/// Emphasis ranges for one run: the removed lines' then the added lines'.
fn run_emphasis(old: &[Line], new: &[Line], deadline: Instant) -> Vec<Vec<Range<usize>>> {
    let old_texts: Vec<&str> = old.iter().map(|line| line.text.as_str()).collect();
    let new_texts: Vec<&str> = new.iter().map(|line| line.text.as_str()).collect();
    let diff = TextDiff::configure().diff_slices(&old_texts, &new_texts);
    let replace = DiffOp::Replace {
        old_index: 0,
        old_len: old.len(),
        new_index: 0,
        new_len: new.len(),
    };
    let mut options = InlineChangeOptions::new();
    options.semantic_cleanup(true);
    let mut ranges: Vec<Vec<Range<usize>>> = vec![Vec::new(); old.len() + new.len()];
    for change in diff.iter_inline_changes_with_options_deadline(&replace, options, Some(deadline))
    {
        let slot = match (change.old_index(), change.new_index()) {
            (Some(index), None) => index,
            (None, Some(index)) => old.len() + index,
            _ => continue,
        };
        let Some(line_ranges) = ranges.get_mut(slot) else {
            continue;
        };
        let mut offset = 0;
        for (emphasized, value) in change.values() {
            let end = offset + value.len();
            if *emphasized && !value.is_empty() {
                match line_ranges.last_mut() {
                    Some(last) if last.end == offset => last.end = end,
                    _ => line_ranges.push(offset..end),
                }
            }
            offset = end;
        }
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn diff(old: &str, new: &str) -> FileDiff {
        FileDiff::compute("a.rs", Some(old.as_bytes()), Some(new.as_bytes())).unwrap()
    }

    fn plain(width: usize) -> TerminalStyle {
        TerminalStyle {
            color: false,
            width,
            tab_width: 4,
        }
    }

    #[test]
    fn plain_layout() {
        let old = "fn a() {\n    one();\n}\n";
        let new = "fn a() {\n    two();\n}\n";
        assert_eq!(
            diff(old, new).render_terminal(&plain(80)),
            "a.rs +1 −1\n\
             1 1 │ fn a() {\n\
             2   │-    one();\n\
             \x20 2 │+    two();\n\
             3 3 │ }\n"
        );
    }

    #[test]
    fn plain_has_no_escapes_and_color_has_emphasis() {
        let d = diff("let total = a + b;\n", "let total = a - b;\n");
        let plain_text = d.render_terminal(&plain(80));
        assert!(!plain_text.contains('\x1b'), "{plain_text:?}");
        let colored = d.render_terminal(&TerminalStyle {
            color: true,
            ..plain(80)
        });
        assert!(colored.contains(RED) && colored.contains(GREEN));
        assert!(
            colored.contains(&format!("{RED_EMPHASIS}+{RESET}")),
            "{colored:?}"
        );
        assert!(
            colored.contains(&format!("{GREEN_EMPHASIS}-{RESET}")),
            "{colored:?}"
        );
        // Unchanged words are not emphasized.
        assert!(
            colored.contains(&format!("{RED}let total = a {RESET}")),
            "{colored:?}"
        );
    }

    #[test]
    fn wraps_with_a_blank_gutter() {
        let d = diff("x\n", &format!("{}\n", "abcdefghij".repeat(3)));
        let text = d.render_terminal(&plain(22));
        assert_eq!(
            text,
            "a.rs +1 −1\n\
             1   │-x\n\
             \x20 1 │+abcdefghijabcdef\n\
             \x20   │ ghijabcdefghij\n"
        );
    }

    #[test]
    fn wide_characters_wrap_by_display_width() {
        let d = diff("", &format!("{}\n", "日本語".repeat(4)));
        let text = d.render_terminal(&plain(18));
        // 5 + 1 gutter columns leave 12 for text: six double-width characters a row.
        assert_eq!(text.lines().nth(1), Some("  1 │+日本語日本語"));
        assert_eq!(text.lines().nth(2), Some("    │ 日本語日本語"));
    }

    #[test]
    fn tabs_expand_to_tab_stops() {
        let d = diff("", "\tx\n ab\ty\n");
        let text = d.render_terminal(&plain(0));
        assert!(text.contains("│+    x\n"), "{text}");
        assert!(text.contains("│+ ab y\n"), "{text}");
    }

    #[test]
    fn control_characters_cannot_reach_the_terminal() {
        let d = diff("", "evil \x1b[2J here\u{202e}\n");
        let text = d.render_terminal(&plain(0));
        assert!(
            !text.contains('\x1b') && !text.contains('\u{202e}'),
            "{text:?}"
        );
        assert!(text.contains("evil ␛[2J here\u{fffd}"));
    }

    #[test]
    fn hunks_are_separated() {
        let old: String = (1..=30).map(|n| format!("{n}\n")).collect();
        let new = old
            .replace("\n5\n", "\nfive\n")
            .replace("\n25\n", "\n25b\n");
        let text = diff(&old, &new).render_terminal(&plain(80));
        assert!(text.contains(" 8  8 │ 8\n      ⋮\n22 22 │ 22\n"), "{text}");
    }

    #[test]
    fn header_notes() {
        let created = FileDiff::compute("n", None, Some(b"a\n")).unwrap();
        assert_eq!(
            created.render_terminal(&plain(80)).lines().next(),
            Some("n +1 −0 (new file)")
        );
        let renamed = diff("a\n", "a\n").renamed("b.rs");
        assert_eq!(renamed.render_terminal(&plain(80)), "b.rs → a.rs +0 −0\n");
        assert_eq!(
            diff("a\n", "a\n").render_terminal(&plain(80)),
            "a.rs (no changes)\n"
        );
    }

    #[test]
    fn missing_final_newline_is_shown() {
        let text = diff("a\n\nb", "a\n\nb\n").render_terminal(&plain(80));
        assert_eq!(
            text,
            "a.rs +1 −1\n\
             1 1 │ a\n\
             2 2 │\n\
             3   │-b\n\
             \x20   │ \\ No newline at end of file\n\
             \x20 3 │+b\n"
        );
    }

    #[test]
    fn ending_only_change_shows_the_marker() {
        let text = diff("a\r\n", "a\n").render_terminal(&plain(80));
        assert_eq!(text, "a.rs +1 −1\n1   │-a␍\n  1 │+a\n");
    }

    #[test]
    fn emphasis_ranges_cover_changed_words() {
        let lines = diff("let x = old_name;\n", "let x = new_name;\n").hunks[0]
            .lines
            .clone();
        let ranges = word_emphasis(&lines, Instant::now() + EMPHASIS_TIME_LIMIT);
        assert_eq!(ranges, vec![vec![8..16], vec![8..16]]);
    }
}
