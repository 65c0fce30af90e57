//! The line alignment: which lines of the region are equal and which changed.

use std::ops::Range;
use std::time::{Duration, Instant};

use similar::{Algorithm, DiffOp, capture_diff_slices_deadline};

use crate::lines::LineIndex;

/// Time the line alignment may take before it settles for a coarser (still correct) result.
///
/// Ordinary edits finish far inside it; it exists so that pathological input (two huge,
/// unrelated, highly repetitive texts) degrades to bigger hunks instead of stalling a tool
/// call.
pub const ALIGNMENT_TIME_LIMIT: Duration = Duration::from_millis(200);

/// One step of the edit script, in line indices of the region's [`LineIndex`]es.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    Equal {
        old: usize,
        new: usize,
        len: usize,
    },
    Change {
        old: Range<usize>,
        new: Range<usize>,
    },
}

/// Aligns the lines of two regions.
///
/// Runs Myers (similar's heuristic variant, the fastest of its algorithms on large inputs) on
/// the line fingerprints, then checks every equal run against the bytes: a fingerprint
/// collision turns into a changed line instead of a wrong "equal". Adjacent deletions and
/// insertions come out merged into one [`Op::Change`].
pub(crate) fn align(old: &LineIndex<'_>, new: &LineIndex<'_>) -> Vec<Op> {
    let deadline = Instant::now() + ALIGNMENT_TIME_LIMIT;
    let ops = capture_diff_slices_deadline(
        Algorithm::Myers,
        old.fingerprints(),
        new.fingerprints(),
        Some(deadline),
    );
    let mut script = Script::default();
    for op in ops {
        match op {
            DiffOp::Equal {
                old_index,
                new_index,
                len,
            } => script.equal_checked(old, new, old_index, new_index, len),
            DiffOp::Delete {
                old_index,
                old_len,
                new_index,
            } => script.change(old_index..old_index + old_len, new_index..new_index),
            DiffOp::Insert {
                old_index,
                new_index,
                new_len,
            } => script.change(old_index..old_index, new_index..new_index + new_len),
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => script.change(
                old_index..old_index + old_len,
                new_index..new_index + new_len,
            ),
        }
    }
    script.ops
}

#[derive(Default)]
struct Script {
    ops: Vec<Op>,
}

impl Script {
    fn equal(&mut self, old: usize, new: usize, len: usize) {
        if len == 0 {
            return;
        }
        if let Some(Op::Equal { len: last, .. }) = self.ops.last_mut() {
            *last += len;
        } else {
            self.ops.push(Op::Equal { old, new, len });
        }
    }

    fn change(&mut self, old: Range<usize>, new: Range<usize>) {
        if old.is_empty() && new.is_empty() {
            return;
        }
        if let Some(Op::Change {
            old: last_old,
            new: last_new,
        }) = self.ops.last_mut()
        {
            last_old.end = old.end;
            last_new.end = new.end;
        } else {
            self.ops.push(Op::Change { old, new });
        }
    }

    /// Records an equal run after checking it byte for byte; lines whose fingerprints matched
    /// but whose bytes differ become one-line changes.
    fn equal_checked(
        &mut self,
        old: &LineIndex<'_>,
        new: &LineIndex<'_>,
        old_start: usize,
        new_start: usize,
        len: usize,
    ) {
        // Whole runs are contiguous bytes on both sides, so one comparison covers them.
        if old.span(old_start..old_start + len) == new.span(new_start..new_start + len) {
            self.equal(old_start, new_start, len);
            return;
        }
        for offset in 0..len {
            let (o, n) = (old_start + offset, new_start + offset);
            if old.line(o) == new.line(n) {
                self.equal(o, n, 1);
            } else {
                self.change(o..o + 1, n..n + 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(old: &str, new: &str) -> Vec<Op> {
        let old_index = LineIndex::new(old.as_bytes(), 0..old.len());
        let new_index = LineIndex::new(new.as_bytes(), 0..new.len());
        align(&old_index, &new_index)
    }

    #[test]
    fn merges_deletes_and_inserts_into_changes() {
        assert_eq!(
            script("a\nb\nc\nd\n", "a\nx\ny\nd\n"),
            [
                Op::Equal {
                    old: 0,
                    new: 0,
                    len: 1
                },
                Op::Change {
                    old: 1..3,
                    new: 1..3
                },
                Op::Equal {
                    old: 3,
                    new: 3,
                    len: 1
                },
            ]
        );
    }

    #[test]
    fn empty_sides() {
        assert_eq!(
            script("", "a\nb\n"),
            [Op::Change {
                old: 0..0,
                new: 0..2
            }]
        );
        assert_eq!(script("", ""), []);
    }

    #[test]
    fn a_collision_becomes_a_change() {
        let old = LineIndex::new(b"a\nb\nc\n", 0..6);
        let new = LineIndex::new(b"a\nB\nc\n", 0..6);
        let mut script = Script::default();
        // Pretend the aligner matched all three lines.
        script.equal_checked(&old, &new, 0, 0, 3);
        assert_eq!(
            script.ops,
            [
                Op::Equal {
                    old: 0,
                    new: 0,
                    len: 1
                },
                Op::Change {
                    old: 1..2,
                    new: 1..2
                },
                Op::Equal {
                    old: 2,
                    new: 2,
                    len: 1
                },
            ]
        );
    }
}
