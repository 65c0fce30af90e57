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

/// Consecutive equal lines that resynchronise the two sides after a difference.
const ANCHOR_LINES: usize = 8;
/// How far (old lines skipped + new lines skipped) to look for an anchor before handing the
/// rest of the region to Myers.
const ANCHOR_SEARCH: usize = 128;

/// Aligns the lines of two regions.
///
/// Walks both sides in step while fingerprints agree. At each difference it looks for the
/// nearest anchor, [`ANCHOR_LINES`] equal lines (or the end of both sides), within
/// [`ANCHOR_SEARCH`] skipped lines, and aligns just the lines before it with Myers (similar's
/// heuristic variant). Scattered edits in a large file thus cost many tiny Myers runs instead
/// of one over the whole file. When no anchor is near (dense or large edits), Myers aligns the
/// whole region after all.
///
/// Every equal run is then checked against the bytes: a fingerprint collision turns into a
/// changed line instead of a wrong "equal". Adjacent deletions and insertions come out merged
/// into one [`Op::Change`].
pub(crate) fn align(old: &LineIndex<'_>, new: &LineIndex<'_>) -> Vec<Op> {
    let deadline = Instant::now() + ALIGNMENT_TIME_LIMIT;
    let (a, b) = (old.fingerprints(), new.fingerprints());
    let mut script = Script::default();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let same = a[i..]
            .iter()
            .zip(&b[j..])
            .take_while(|(x, y)| x == y)
            .count();
        if same > 0 {
            script.equal_checked(old, new, i, j, same);
            i += same;
            j += same;
            continue;
        }
        // Past the deadline, stop looking for anchors: Myers then settles everything quickly.
        let anchor = (Instant::now() < deadline).then(|| find_anchor(a, b, i, j));
        let Some((next_i, next_j)) = anchor.flatten() else {
            // No anchor near: align the whole region with Myers instead. (Not just the rest:
            // similar's Myers can be an order of magnitude slower on a tail that starts off
            // the diagonal than on the whole input.)
            let mut whole = Script::default();
            whole.myers(old, new, 0..a.len(), 0..b.len(), deadline);
            return whole.ops;
        };
        script.myers(old, new, i..next_i, j..next_j, deadline);
        (i, j) = (next_i, next_j);
    }
    script.ops
}

/// The nearest `(i, j)` at or after a difference at `(from_i, from_j)` where the sides agree
/// again: the next [`ANCHOR_LINES`] lines are equal, or everything left is.
fn find_anchor(a: &[u32], b: &[u32], from_i: usize, from_j: usize) -> Option<(usize, usize)> {
    let is_anchor = |i: usize, j: usize| {
        let (rest_a, rest_b) = (&a[i..], &b[j..]);
        if rest_a.len().min(rest_b.len()) >= ANCHOR_LINES {
            rest_a[..ANCHOR_LINES] == rest_b[..ANCHOR_LINES]
        } else {
            rest_a == rest_b
        }
    };
    (1..=ANCHOR_SEARCH).find_map(|skipped| {
        (0..=skipped).find_map(|skip_a| {
            let (i, j) = (from_i + skip_a, from_j + skipped - skip_a);
            (i <= a.len() && j <= b.len() && is_anchor(i, j)).then_some((i, j))
        })
    })
}

#[derive(Default)]
struct Script {
    ops: Vec<Op>,
}

impl Script {
    /// Aligns `old_lines` against `new_lines` with Myers and records the result.
    fn myers(
        &mut self,
        old: &LineIndex<'_>,
        new: &LineIndex<'_>,
        old_lines: Range<usize>,
        new_lines: Range<usize>,
        deadline: Instant,
    ) {
        let (i, j) = (old_lines.start, new_lines.start);
        let ops = capture_diff_slices_deadline(
            Algorithm::Myers,
            &old.fingerprints()[old_lines],
            &new.fingerprints()[new_lines],
            Some(deadline),
        );
        for op in ops {
            match op {
                DiffOp::Equal {
                    old_index,
                    new_index,
                    len,
                } => self.equal_checked(old, new, i + old_index, j + new_index, len),
                DiffOp::Delete {
                    old_index,
                    old_len,
                    new_index,
                } => self.change(
                    i + old_index..i + old_index + old_len,
                    j + new_index..j + new_index,
                ),
                DiffOp::Insert {
                    old_index,
                    new_index,
                    new_len,
                } => self.change(
                    i + old_index..i + old_index,
                    j + new_index..j + new_index + new_len,
                ),
                DiffOp::Replace {
                    old_index,
                    old_len,
                    new_index,
                    new_len,
                } => self.change(
                    i + old_index..i + old_index + old_len,
                    j + new_index..j + new_index + new_len,
                ),
            }
        }
    }

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

    #[test]
    fn an_insertion_longer_than_the_anchor_search_falls_back_to_myers() {
        let old: String = (0..1000).map(|n| format!("{n}\n")).collect();
        let block: String = (0..300).map(|n| format!("new {n}\n")).collect();
        let new = old.replacen("500\n", &format!("{block}500\n"), 1);
        assert_eq!(
            script(&old, &new),
            [
                Op::Equal {
                    old: 0,
                    new: 0,
                    len: 500
                },
                Op::Change {
                    old: 500..500,
                    new: 500..800
                },
                Op::Equal {
                    old: 500,
                    new: 800,
                    len: 500
                },
            ]
        );
    }

    /// Deterministic pseudo-random numbers for the property tests.
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, bound: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((self.0 >> 33) % bound as u64) as usize
        }
    }

    fn changed_lines(ops: &[Op]) -> usize {
        ops.iter()
            .map(|op| match op {
                Op::Change { old, new } => old.len() + new.len(),
                Op::Equal { .. } => 0,
            })
            .sum()
    }

    /// Applies an edit script: the new side's lines, taken from old (equal) or new (changed).
    fn replay<'a>(ops: &[Op], old: &LineIndex<'a>, new: &LineIndex<'a>) -> Vec<&'a [u8]> {
        let mut lines = Vec::new();
        let (mut next_old, mut next_new) = (0, 0);
        for op in ops {
            match op {
                Op::Equal {
                    old: o,
                    new: n,
                    len,
                } => {
                    assert_eq!((*o, *n), (next_old, next_new), "ops must be contiguous");
                    lines.extend((*o..o + len).map(|line| old.line(line)));
                    (next_old, next_new) = (o + len, n + len);
                }
                Op::Change { old: o, new: n } => {
                    assert_eq!(
                        (o.start, n.start),
                        (next_old, next_new),
                        "ops must be contiguous"
                    );
                    lines.extend(n.clone().map(|line| new.line(line)));
                    (next_old, next_new) = (o.end, n.end);
                }
            }
        }
        assert_eq!(
            (next_old, next_new),
            (old.len(), new.len()),
            "ops must cover both sides"
        );
        lines
    }

    #[test]
    fn anchored_alignment_is_correct_and_as_small_as_myers_on_distinct_lines() {
        let mut rng = Lcg(1);
        let mut larger_on_repetitive_text = 0;
        for case in 0..1500 {
            // Distinct-ish lines like source code, or a handful of lines repeated over and over.
            let alphabet = [1000, 3, 10][case % 3];
            let count = 20 + rng.below(300);
            let mut lines: Vec<String> = (0..count)
                .map(|_| format!("l{}", rng.below(alphabet)))
                .collect();
            let old_text = lines.join("\n") + "\n";
            for _ in 0..1 + rng.below(8) {
                let at = rng.below(lines.len());
                match rng.below(4) {
                    0 => {
                        for _ in 0..1 + rng.below(20) {
                            lines.insert(at, format!("l{}", rng.below(alphabet)));
                        }
                    }
                    1 => {
                        let end = (at + 1 + rng.below(10)).min(lines.len());
                        lines.drain(at..end);
                    }
                    _ => lines[at] = format!("l{}", rng.below(alphabet)),
                }
                if lines.is_empty() {
                    lines.push("only".into());
                }
            }
            let new_text = lines.join("\n") + "\n";
            let old = LineIndex::new(old_text.as_bytes(), 0..old_text.len());
            let new = LineIndex::new(new_text.as_bytes(), 0..new_text.len());
            let anchored = align(&old, &new);
            assert_eq!(replay(&anchored, &old, &new).concat(), new_text.as_bytes());

            let mut plain = Script::default();
            let deadline = Instant::now() + ALIGNMENT_TIME_LIMIT;
            plain.myers(&old, &new, 0..old.len(), 0..new.len(), deadline);
            let (ours, myers) = (changed_lines(&anchored), changed_lines(&plain.ops));
            if alphabet == 1000 {
                assert!(
                    ours <= myers,
                    "case {case}: {ours} changed lines, Myers {myers}"
                );
            } else if ours > myers {
                larger_on_repetitive_text += 1;
            }
        }
        // On text made of 3 or 10 distinct lines a near anchor can be a false one; it costs a
        // few extra lines in a small share of cases (47 of these 1000).
        assert!(
            larger_on_repetitive_text < 60,
            "{larger_on_repetitive_text}"
        );
    }
}
