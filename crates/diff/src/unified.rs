//! The unified (git-style) rendering and the `--stat`-style summary line.

use std::fmt::Write as _;

use crate::model::{Change, FileDiff, LineKind, visible_crlf};

/// Shown after the text of a changed line whose `\r\n` ending matters (see [`FileDiff::unified`]).
pub const CR_MARKER: char = '\u{240d}';

const NO_NEWLINE: &str = "\\ No newline at end of file\n";

impl FileDiff {
    /// The diff as git-style unified text, for the model's tool result and for logs.
    ///
    /// `diff --git a/P b/P`, then `new file mode 100644` / `deleted file mode 100644` or
    /// `rename from` / `rename to` lines, then `--- a/P` and `+++ b/P` (`/dev/null` for the
    /// missing side of a create or delete) and the hunks: `@@ -a,b +c,d @@` headers (`,1` left
    /// out as git does), 3 lines of context, and `\ No newline at end of file` after a last
    /// line without an ending. Empty when [`FileDiff::is_empty`].
    ///
    /// It is meant for reading rather than `git apply`: modes are assumed (`100644`), there
    /// are no `index` or `similarity index` lines, paths are not quoted, and carriage returns
    /// are left out of line text. Where a run of changed lines mixes `\r\n` with other endings,
    /// the `\r\n` lines end in [`CR_MARKER`] (`␍`) so an ending-only change stays visible.
    pub fn unified(&self) -> String {
        if self.is_empty() {
            return String::new();
        }
        let lines: usize = self.hunks.iter().map(|hunk| hunk.lines.len()).sum();
        let mut out = String::with_capacity(128 + lines * 48);
        let old_path = self.old_path();
        let _ = writeln!(out, "diff --git a/{old_path} b/{}", self.path);
        match &self.change {
            Change::Create => out.push_str("new file mode 100644\n"),
            Change::Delete => out.push_str("deleted file mode 100644\n"),
            Change::Rename { from } => {
                let _ = writeln!(out, "rename from {from}\nrename to {}", self.path);
            }
            Change::Modify => {}
        }
        if self.hunks.is_empty() {
            return out;
        }
        match self.change {
            Change::Create => out.push_str("--- /dev/null\n"),
            _ => {
                let _ = writeln!(out, "--- a/{old_path}");
            }
        }
        match self.change {
            Change::Delete => out.push_str("+++ /dev/null\n"),
            _ => {
                let _ = writeln!(out, "+++ b/{}", self.path);
            }
        }
        for hunk in &self.hunks {
            out.push_str("@@ -");
            push_range(&mut out, hunk.old_start, hunk.old_len);
            out.push_str(" +");
            push_range(&mut out, hunk.new_start, hunk.new_len);
            out.push_str(" @@\n");
            let marks = visible_crlf(&hunk.lines);
            for (line, marked) in hunk.lines.iter().zip(marks) {
                out.push(match line.kind {
                    LineKind::Context => ' ',
                    LineKind::Added => '+',
                    LineKind::Removed => '-',
                });
                out.push_str(&line.text);
                if marked {
                    out.push(CR_MARKER);
                }
                out.push('\n');
                if line.no_newline_at_end {
                    out.push_str(NO_NEWLINE);
                }
            }
        }
        out
    }

    /// git's `--stat` summary line, e.g. ` 1 file changed, 3 insertions(+), 1 deletion(-)`.
    ///
    /// Same wording, pluralisation and omissions as git: a side with no lines is left out
    /// unless both are zero (a pure rename), and an empty diff is ` 0 files changed`.
    pub fn summary(&self) -> String {
        if self.is_empty() {
            return " 0 files changed".to_owned();
        }
        let plural = |count: usize| if count == 1 { "" } else { "s" };
        let mut out = String::from(" 1 file changed");
        if self.added > 0 || self.removed == 0 {
            let _ = write!(out, ", {} insertion{}(+)", self.added, plural(self.added));
        }
        if self.removed > 0 || self.added == 0 {
            let _ = write!(
                out,
                ", {} deletion{}(-)",
                self.removed,
                plural(self.removed)
            );
        }
        out
    }
}

/// `start,len`, or just `start` when `len` is 1, as in unified diff hunk headers.
fn push_range(out: &mut String, start: usize, len: usize) {
    if len == 1 {
        let _ = write!(out, "{start}");
    } else {
        let _ = write!(out, "{start},{len}");
    }
}

#[cfg(test)]
mod tests {
    use crate::FileDiff;
    use pretty_assertions::assert_eq;

    fn diff(old: &str, new: &str) -> FileDiff {
        FileDiff::compute("src/a.rs", Some(old.as_bytes()), Some(new.as_bytes())).unwrap()
    }

    #[test]
    fn modify() {
        assert_eq!(
            diff("a\nb\nc\n", "a\nB\nc\n").unified(),
            "diff --git a/src/a.rs b/src/a.rs\n--- a/src/a.rs\n+++ b/src/a.rs\n\
             @@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        );
    }

    #[test]
    fn single_line_ranges_drop_the_length() {
        let text = diff("a\n", "b\n").unified();
        assert!(text.contains("@@ -1 +1 @@\n-a\n+b\n"), "{text}");
    }

    #[test]
    fn create_and_delete_use_dev_null() {
        let created = FileDiff::compute("n.txt", None, Some(b"x\ny")).unwrap();
        assert_eq!(
            created.unified(),
            "diff --git a/n.txt b/n.txt\nnew file mode 100644\n--- /dev/null\n+++ b/n.txt\n\
             @@ -0,0 +1,2 @@\n+x\n+y\n\\ No newline at end of file\n"
        );
        let deleted = FileDiff::compute("n.txt", Some(b"x\n"), None).unwrap();
        assert!(
            deleted
                .unified()
                .ends_with("--- a/n.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n")
        );
        let empty = FileDiff::compute("e", None, Some(b"")).unwrap();
        assert_eq!(
            empty.unified(),
            "diff --git a/e b/e\nnew file mode 100644\n"
        );
    }

    #[test]
    fn rename_without_change_has_no_hunks() {
        let d = diff("a\n", "a\n").renamed("old.rs");
        assert_eq!(
            d.unified(),
            "diff --git a/old.rs b/src/a.rs\nrename from old.rs\nrename to src/a.rs\n"
        );
        assert_eq!(
            d.summary(),
            " 1 file changed, 0 insertions(+), 0 deletions(-)"
        );
    }

    #[test]
    fn no_change_renders_nothing() {
        let d = diff("a\n", "a\n");
        assert_eq!(d.unified(), "");
        assert_eq!(d.summary(), " 0 files changed");
    }

    #[test]
    fn summary_wording() {
        assert_eq!(
            diff("a\n", "b\n").summary(),
            " 1 file changed, 1 insertion(+), 1 deletion(-)"
        );
        assert_eq!(
            diff("a\n", "a\nb\nc\n").summary(),
            " 1 file changed, 2 insertions(+)"
        );
        assert_eq!(
            diff("a\nb\nc\n", "a\n").summary(),
            " 1 file changed, 2 deletions(-)"
        );
    }

    #[test]
    fn ending_only_change_is_marked() {
        let text = diff("a\r\nb\r\n", "a\r\nb\n").unified();
        assert!(
            text.ends_with("@@ -1,2 +1,2 @@\n a\n-b\u{240d}\n+b\n"),
            "{text}"
        );
        assert!(!text.contains('\r'));
    }
}
