//! The `edit` tool: replace an exact string in a file.
//!
//! - [`EditTool`] / [`EditParams`]: the tool and its arguments (`file_path`, `old_string`,
//!   `new_string`, `replace_all`).
//! - `EditPlan`: what a call will do (the bytes to write, the diff, the stamp of what was read),
//!   prepared once ([`Tool::prepare`]) and carried through the policy's prompt to the run, which
//!   refuses the write if the file changed in between.
//! - [`replace`] / [`Mismatch`]: the string replacement itself and why it can fail (absent,
//!   ambiguous), with the line numbers the model needs to fix its call.
//!
//! A CRLF file is matched as LF text and written back as CRLF; a UTF-8 byte-order mark is kept;
//! text that is not UTF-8 is refused rather than corrupted; the runtime's atomic write keeps the
//! file mode. The file must have been read in this session and be unchanged since.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;

use super::text::{self, FileChange, LineEndings, TextError, TextFile};
use crate::capability::{Access, RequirementSet};
use crate::tool::{
    Artifact, CallTarget, CallView, Describe, FileStamp, Prepared, Preview, Subject, Tool,
    ToolContext, ToolError, ToolKind, ToolOutput, ToolSpec,
};

/// The tool's id, as the registry spells it.
pub const ID: &str = crate::tool::BundledTool::Edit.id();

/// Files larger than this are not edited (an edit holds the old and new text in memory).
pub const MAX_EDIT_BYTES: u64 = 64 * 1024 * 1024;

/// Occurrence lines listed in an "ambiguous" error.
const LISTED_LINES: usize = 20;

/// Arguments of `edit`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditParams {
    /// Absolute or workspace-relative path.
    pub file_path: String,
    /// The exact text to replace.
    pub old_string: String,
    /// The replacement (different from `old_string`).
    pub new_string: String,
    /// Replace every occurrence.
    #[serde(default)]
    pub replace_all: bool,
}

/// The `edit` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditTool;

const DESCRIPTION: &str = "\
Replaces exact text in a file.
- `old_string` must match the current text exactly (whitespace included, without the \
line-number prefix `read` shows) and occur once: add surrounding lines to make it unique, or \
set `replace_all`.
- The file must have been read in this session and unchanged since. An empty `old_string` \
creates a new file.
- Keeps line endings, byte-order mark and permissions. Returns the diff.";

impl Tool for EditTool {
    type Params = EditParams;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<EditParams>(ID, DESCRIPTION)
            .kind(ToolKind::Edit)
            .title("Edit a file")
            .subject(Subject::Path(Some("file_path".into())))
            .requires(RequirementSet::fs_read_write(
                &["{workspace}/**"],
                &["{workspace}/**"],
            ))
    }

    fn target(&self, params: &EditParams) -> CallTarget {
        CallTarget::Path(params.file_path.clone())
    }

    fn describe(&self, params: &EditParams, how: Describe<'_>) -> CallView {
        CallView {
            title: format!("Edit {}", how.shown(&params.file_path)),
            locations: vec![how.location(&params.file_path, None)],
        }
    }

    async fn prepare(
        &self,
        params: &EditParams,
        subject: Option<&Path>,
        ctx: &ToolContext,
    ) -> Result<Option<Prepared>, ToolError> {
        let plan = EditPlan::new(params, subject, ctx).await?;
        Ok(Some(Prepared::new(
            plan.change.acp.clone().map(Preview::Diff),
            plan,
        )))
    }

    async fn run_prepared(
        &self,
        _params: EditParams,
        prepared: Prepared,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let plan: EditPlan = prepared.plan()?;
        text::commit_prepared(
            ctx,
            &plan.canonical,
            plan.stamp.as_ref(),
            &plan.shown,
            (ID, "edit"),
            Some(&plan.bytes),
        )
        .await?;
        plan.output(ctx).await
    }

    async fn run(&self, params: EditParams, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let canonical = ctx
            .runtime
            .resolve_checked(&params.file_path, Access::Write)?;
        let plan = EditPlan::new(&params, Some(&canonical), ctx).await?;
        self.run_prepared(params, Prepared::new(None, plan), ctx)
            .await
    }
}

/// What one `edit` call will do, prepared once (read, replaced, diffed) and carried through
/// the policy, the approval and the run.
#[derive(Debug)]
struct EditPlan {
    canonical: PathBuf,
    shown: String,
    /// What the disk said of the file when it was read (`None`: the edit creates it). The run
    /// refuses a file whose stamp changed since.
    stamp: Option<FileStamp>,
    /// The file existed.
    existed: bool,
    /// The bytes to write: the new text, encoded as the file was.
    bytes: Vec<u8>,
    crlf: bool,
    replacements: usize,
    /// Line of the first replacement (in the new text).
    line: usize,
    /// The diff, computed once: for the model, for the prompt, for the editor.
    change: FileChange,
}

impl EditPlan {
    async fn new(
        params: &EditParams,
        subject: Option<&Path>,
        ctx: &ToolContext,
    ) -> Result<Self, ToolError> {
        if params.old_string == params.new_string {
            return Err(ToolError::BadArgument(
                "old_string and new_string are identical, so the edit would change nothing. \
                 Nothing was written."
                    .into(),
            ));
        }
        let canonical =
            ctx.runtime
                .subject_or_resolve(subject, &params.file_path, Access::Write)?;
        let shown = ctx.runtime.display_path(&canonical);
        let Some((meta, stamp)) = text::inspect(ctx, &canonical).await? else {
            if params.old_string.is_empty() {
                let change =
                    FileChange::compute(&shown, &canonical, None, params.new_string.as_bytes());
                return Ok(Self {
                    canonical,
                    shown,
                    stamp: None,
                    existed: false,
                    bytes: params.new_string.clone().into_bytes(),
                    crlf: false,
                    replacements: 1,
                    line: 1,
                    change,
                });
            }
            return Err(ToolError::NotFound(format!(
                "{shown} does not exist (looked for {}). Check the path; to create a file use \
                 `write`, or `edit` with an empty old_string.",
                canonical.display()
            )));
        };
        if meta.is_dir() {
            return Err(ToolError::BadArgument(format!(
                "{shown} is a directory; edit changes files"
            )));
        }
        if !meta.is_file() {
            return Err(ToolError::BadArgument(format!(
                "{shown} is not a regular file (a device, socket or pipe); edit changes files only"
            )));
        }
        text::require_fresh_read(ctx, &canonical, &shown, &stamp, ID)?;
        if stamp.len > MAX_EDIT_BYTES {
            return Err(ToolError::BadArgument(format!(
                "{shown} is {} bytes, more than edit handles ({MAX_EDIT_BYTES}); use a \
                 stream editor through bash instead",
                stamp.len
            )));
        }
        let (old, source) = text::current_bytes(ctx, &canonical).await?;
        if source == text::ContentSource::Disk && old.len() as u64 != stamp.len {
            return Err(text::changed(&shown, "it changed while being read", ID));
        }
        let mut file = TextFile::decode(old).map_err(|e| undecodable(&shown, &e))?;
        let old_text = std::mem::take(&mut file.text);
        let edited = if params.old_string.is_empty() {
            if !old_text.is_empty() {
                return Err(ToolError::BadArgument(format!(
                    "old_string is empty, but {shown} already has content. To replace all of it \
                     use `write`; to change part of it, put the exact text to replace in \
                     old_string. Nothing was written."
                )));
            }
            Replaced {
                text: params.new_string.clone(),
                count: 1,
                line: 1,
            }
        } else {
            edit_text(
                &old_text,
                file.endings,
                &params.old_string,
                &params.new_string,
                params.replace_all,
            )
            .map_err(|m| m.into_error(&shown, &old_text, &params.old_string))?
        };
        let change = FileChange::compute(
            &shown,
            &canonical,
            Some(old_text.as_bytes()),
            edited.text.as_bytes(),
        );
        drop(old_text);
        let encoded = match file.encoded(&edited.text) {
            std::borrow::Cow::Owned(bytes) => Some(bytes),
            std::borrow::Cow::Borrowed(_) => None,
        };
        Ok(Self {
            bytes: encoded.unwrap_or_else(|| edited.text.into_bytes()),
            canonical,
            shown,
            stamp: Some(stamp),
            existed: true,
            crlf: file.endings.is_crlf(),
            replacements: edited.count,
            line: edited.line,
            change,
        })
    }

    async fn output(self, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let change = self.change;
        let mut message = if self.existed {
            format!(
                "Edited {}: replaced {} occurrence{} ({}).",
                self.shown,
                self.replacements,
                if self.replacements == 1 { "" } else { "s" },
                change.counts()
            )
        } else {
            format!(
                "Created {} ({}).",
                self.shown,
                text::lines_phrase(text::line_count(&self.bytes))
            )
        };
        if self.crlf {
            message.push_str(" CRLF line endings kept.");
        }
        if !change.unified.is_empty() && self.existed {
            message.push_str("\n\n");
            message.push_str(&change.unified);
        }
        let (text, output_path) = ctx
            .cap_bytes(ID, message, ctx.session.limits.read_bytes)
            .await?;
        let path = self.canonical.display().to_string();
        let line = change.first_line.unwrap_or(self.line);
        let mut output = ToolOutput {
            text,
            output_path,
            ..ToolOutput::default()
        }
        .with("path", self.shown.as_str())
        .with("replacements", self.replacements)
        .with("added", change.added)
        .with("removed", change.removed)
        .with("line", line);
        if let Some(diff) = change.acp {
            output = output.artifact(Artifact::Diff(diff));
        }
        Ok(output.artifact(Artifact::Location {
            path,
            line: u32::try_from(line).ok(),
        }))
    }
}

fn undecodable(shown: &str, error: &TextError) -> ToolError {
    let advice = match error {
        TextError::NotUtf8 { .. } | TextError::Utf16 => {
            " Editing it as UTF-8 would corrupt it: convert it first (e.g. with iconv through \
             bash), or replace it whole with `write`."
        }
        TextError::Binary { .. } => "",
    };
    ToolError::BadArgument(format!(
        "cannot edit {shown}: {error}. edit changes UTF-8 text files only.{advice} Nothing was \
         written."
    ))
}

/// The result of a successful replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replaced {
    pub text: String,
    /// Occurrences replaced.
    pub count: usize,
    /// 1-based line of the first replacement.
    pub line: usize,
}

/// Why `old_string` could not be replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// It does not occur.
    Absent,
    /// It occurs more than once (overlapping occurrences count) and `replace_all` is false.
    Ambiguous { count: usize, lines: Vec<usize> },
}

/// Replaces `old` (non-empty) by `new` in `haystack`: exactly one occurrence, or all of them.
pub fn replace(haystack: &str, old: &str, new: &str, all: bool) -> Result<Replaced, Mismatch> {
    let first = haystack.find(old).ok_or(Mismatch::Absent)?;
    let line = text::line_at(haystack, first);
    if all {
        let count = haystack.matches(old).count();
        return Ok(Replaced {
            text: haystack.replace(old, new),
            count,
            line,
        });
    }
    let step = haystack[first..].chars().next().map_or(1, char::len_utf8);
    if haystack[first + step..].contains(old) {
        let offsets = occurrences(haystack, old);
        let mut lines = Vec::new();
        let mut counted = (0usize, 1usize);
        for &offset in &offsets {
            counted.1 += text::count_newlines(&haystack.as_bytes()[counted.0..offset]);
            counted.0 = offset;
            if lines.last() != Some(&counted.1) {
                lines.push(counted.1);
            }
        }
        return Err(Mismatch::Ambiguous {
            count: offsets.len(),
            lines,
        });
    }
    let mut text = String::with_capacity(haystack.len() - old.len() + new.len());
    text.push_str(&haystack[..first]);
    text.push_str(new);
    text.push_str(&haystack[first + old.len()..]);
    Ok(Replaced {
        text,
        count: 1,
        line,
    })
}

/// Start offsets of every occurrence, overlapping ones included.
fn occurrences(haystack: &str, needle: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = haystack[from..].find(needle) {
        let at = from + found;
        out.push(at);
        from = at + haystack[at..].chars().next().map_or(1, char::len_utf8);
    }
    out
}

/// [`replace`] in a file's text, keeping its line endings. In a CRLF file `old` and `new` are
/// given CRLF endings and matched on the text as it is (the same matches as LF text against LF
/// text, without converting the whole file twice); in a mixed file, LF-only `old` text that is
/// absent is tried again with CRLF endings.
fn edit_text(
    haystack: &str,
    endings: LineEndings,
    old: &str,
    new: &str,
    all: bool,
) -> Result<Replaced, Mismatch> {
    if endings.is_crlf() {
        let old = text::lf_to_crlf(&text::crlf_to_lf(old));
        let new = text::lf_to_crlf(&text::crlf_to_lf(new));
        return replace(haystack, &old, &new, all);
    }
    match replace(haystack, old, new, all) {
        Err(Mismatch::Absent)
            if endings.crlf > 0 && old.contains('\n') && !old.contains("\r\n") =>
        {
            replace(
                haystack,
                &text::lf_to_crlf(old),
                &text::lf_to_crlf(new),
                all,
            )
        }
        other => other,
    }
}

impl Mismatch {
    fn into_error(self, shown: &str, text: &str, old: &str) -> ToolError {
        match self {
            Mismatch::Ambiguous { count, lines } => {
                let mut listed: Vec<String> = lines
                    .iter()
                    .take(LISTED_LINES)
                    .map(usize::to_string)
                    .collect();
                if lines.len() > LISTED_LINES {
                    listed.push("…".into());
                }
                ToolError::BadArgument(format!(
                    "old_string occurs {count} times in {shown} (at line{} {}). Include more \
                     surrounding lines in old_string so it matches only the place you mean, or \
                     set replace_all to true to change every occurrence. Nothing was written.",
                    if lines.len() == 1 { "" } else { "s" },
                    listed.join(", ")
                ))
            }
            Mismatch::Absent => {
                let haystack = text::crlf_to_lf(text);
                let old = text::crlf_to_lf(old);
                let advice = if has_line_number_prefixes(&old) {
                    "It seems to start its lines with the line numbers `read` shows (a number \
                     and a tab); leave those prefixes out."
                        .to_owned()
                } else if let Some(line) = near_match(&haystack, &old) {
                    format!(
                        "Text that matches when whitespace and indentation are ignored starts at \
                         line {line}: read that part again and copy it exactly, whitespace \
                         included."
                    )
                } else {
                    "Read the file again to see its current content; old_string must match it \
                     exactly, whitespace and indentation included."
                        .to_owned()
                };
                ToolError::NotFound(format!(
                    "old_string was not found in {shown}. {advice} Nothing was written."
                ))
            }
        }
    }
}

/// Every non-blank line starts like `read`'s output: optional spaces, digits, a tab.
fn has_line_number_prefixes(old: &str) -> bool {
    let mut lines = old.lines().filter(|l| !l.trim().is_empty()).peekable();
    lines.peek().is_some()
        && lines.all(|line| {
            let rest = line.trim_start_matches(' ');
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            digits > 0 && rest[digits..].starts_with('\t')
        })
}

/// The first line where `old` matches `haystack` when all whitespace is ignored (its first
/// line may match the end of a line, its last line the start of one).
fn near_match(haystack: &str, old: &str) -> Option<usize> {
    fn squash(s: &str) -> String {
        s.chars().filter(|c| !c.is_whitespace()).collect()
    }
    let mut wanted: Vec<String> = old.lines().map(squash).collect();
    while wanted.last().is_some_and(String::is_empty) {
        wanted.pop();
    }
    let leading = wanted.iter().take_while(|w| w.is_empty()).count();
    wanted.drain(..leading);
    if wanted.is_empty() {
        return None;
    }
    let lines: Vec<String> = haystack.lines().map(squash).collect();
    if let [single] = wanted.as_slice() {
        return lines
            .iter()
            .position(|line| line.contains(single.as_str()))
            .map(|i| i + 1);
    }
    let last = wanted.len() - 1;
    (0..=lines.len().checked_sub(wanted.len())?)
        .find(|&start| {
            wanted.iter().enumerate().all(|(j, want)| {
                let line = &lines[start + j];
                match j {
                    0 => line.ends_with(want.as_str()),
                    j if j == last => line.starts_with(want.as_str()),
                    _ => line == want,
                }
            })
        })
        .map(|start| start + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_one_or_all() {
        let r = replace("a b a", "b", "c", false).unwrap();
        assert_eq!((r.text.as_str(), r.count, r.line), ("a c a", 1, 1));
        assert_eq!(
            replace("x\ny\nx\n", "x", "z", false),
            Err(Mismatch::Ambiguous {
                count: 2,
                lines: vec![1, 3]
            })
        );
        let all = replace("x\ny\nx\n", "x", "z", true).unwrap();
        assert_eq!((all.text.as_str(), all.count), ("z\ny\nz\n", 2));
        assert_eq!(replace("abc", "d", "e", false), Err(Mismatch::Absent));
    }

    #[test]
    fn overlapping_occurrences_are_ambiguous() {
        assert!(matches!(
            replace("aaa", "aa", "b", false),
            Err(Mismatch::Ambiguous { count: 2, .. })
        ));
        assert!(matches!(
            replace("ééé", "éé", "b", false),
            Err(Mismatch::Ambiguous { count: 2, .. })
        ));
    }

    #[test]
    fn crlf_files_match_lf_text_and_stay_crlf() {
        let file = TextFile::decode(b"one\r\ntwo\r\nthree\r\n".to_vec()).unwrap();
        let r = edit_text(&file.text, file.endings, "one\ntwo\n", "1\n2\n", false).unwrap();
        assert_eq!(r.text, "1\r\n2\r\nthree\r\n");
        let r = edit_text(&file.text, file.endings, "two", "two\n2b", false).unwrap();
        assert_eq!(
            (r.text.as_str(), r.line),
            ("one\r\ntwo\r\n2b\r\nthree\r\n", 2)
        );
        let r = edit_text(&file.text, file.endings, "\nthree", "", false).unwrap();
        assert_eq!(r.text, "one\r\ntwo\r\n");
        assert_eq!(
            edit_text(&file.text, file.endings, "e\n", "E\n", false),
            Err(Mismatch::Ambiguous {
                count: 2,
                lines: vec![1, 3]
            })
        );
        let mixed = TextFile::decode(b"lf\none\r\ntwo\r\n".to_vec()).unwrap();
        let r = edit_text(&mixed.text, mixed.endings, "one\ntwo", "uno\ndos", false).unwrap();
        assert_eq!(r.text, "lf\nuno\r\ndos\r\n");
    }

    #[test]
    fn hints_for_absent_text() {
        let text = "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n";
        assert_eq!(near_match(text, "let  x=1;"), Some(2));
        assert_eq!(
            near_match(text, "\tlet x = 1;\n\tprintln!(\"{x}\");"),
            Some(2)
        );
        assert_eq!(near_match(text, "let y = 2;"), None);
        assert!(has_line_number_prefixes(
            "     2\t    let x = 1;\n     3\tfoo"
        ));
        assert!(!has_line_number_prefixes("let x = 1;"));
    }
}
