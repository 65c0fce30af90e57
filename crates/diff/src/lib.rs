//! Keel's diff model and its three renderings.
//!
//! A pure crate: no I/O, no async, no protocol types. The edit and write tools, the ACP
//! front-end and the terminal commands all describe a file change with it.
//!
//! - [`FileDiff::compute`] turns a path and the old and new bytes (either may be missing: a
//!   new file, a deletion) into a [`FileDiff`]: the [`Change`] to the file as a whole, and
//!   [`Hunk`]s of [`Line`]s ([`LineKind::Context`], [`LineKind::Added`],
//!   [`LineKind::Removed`]) with old and new line numbers. Binary input is refused with a
//!   [`DiffError`]; text that is not UTF-8 is decoded lossily and flagged.
//! - [`FileDiff::acp`] gives the [`AcpDiff`] an ACP client shows as an inline diff: the full old
//!   and new text, or for files over [`ACP_FULL_TEXT_LIMIT`] a bounded form made of the hunks.
//! - [`FileDiff::unified`] and [`FileDiff::summary`] give git-style unified text and the
//!   `N file changed, N insertions(+), N deletions(-)` line, for the model and for logs.
//! - [`FileDiff::render_terminal`] draws the diff for a person, in colour or plain, as set by a
//!   [`TerminalStyle`].
//!
//! ```
//! use keel_diff::{FileDiff, TerminalStyle};
//!
//! let diff = FileDiff::compute("src/lib.rs", Some(b"a\nb\nc\n"), Some(b"a\nB\nc\n"))?;
//! assert_eq!((diff.added, diff.removed), (1, 1));
//! assert_eq!(diff.summary(), " 1 file changed, 1 insertion(+), 1 deletion(-)");
//! assert!(diff.unified().contains("@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"));
//! let plain = diff.render_terminal(&TerminalStyle { color: false, width: 80, tab_width: 4 });
//! assert!(plain.starts_with("src/lib.rs +1 −1\n"));
//! # Ok::<(), keel_diff::DiffError>(())
//! ```
//!
//! Lines are compared as raw bytes with their endings, so CRLF files diff line by line and a
//! change of line ending alone is still a change.
//!
//! Large inputs are cheap. Equal stretches are skipped with a byte comparison and never split
//! into lines; only the lines around each difference are split and fingerprinted, and Myers
//! (from `similar`) aligns each difference up to the nearest run of equal lines. When
//! differences are too dense or too large for that, Myers aligns the whole changed region,
//! within [`ALIGNMENT_TIME_LIMIT`]; past it the result gets coarser but stays correct. A
//! 100,000-line file with 1,000 scattered edits goes from bytes to unified text in about 3 ms
//! (see `docs/benchmarks.md`).

mod acp;
mod align;
mod lines;
mod model;
mod terminal;
mod unified;

pub use acp::{ACP_FULL_TEXT_LIMIT, ACP_GAP_LINE, AcpDiff};
pub use align::ALIGNMENT_TIME_LIMIT;
pub use model::{Change, FileDiff, Hunk, Line, LineKind};
pub use terminal::TerminalStyle;
pub use unified::CR_MARKER;

/// Why a diff could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiffError {
    /// One side contains a NUL byte, so it is treated as binary and not diffed.
    #[error("refusing to diff binary file {path}: it contains NUL bytes")]
    Binary {
        /// The file's path.
        path: String,
    },
    /// Neither an old nor a new version was given.
    #[error("nothing to diff for {path}: neither an old nor a new version was given")]
    NothingToCompare {
        /// The file's path.
        path: String,
    },
}
