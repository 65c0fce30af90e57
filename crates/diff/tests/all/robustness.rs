//! Property-style tests: random inputs never panic, and the model always replays to the new
//! text.

use keel_diff::{ACP_FULL_TEXT_LIMIT, DiffError, FileDiff, Hunk, LineKind, TerminalStyle};

/// Deterministic pseudo-random numbers (Knuth's MMIX LCG).
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

/// Pieces that stress a diff: endings, tabs, wide and multi-byte characters, control
/// characters; the last three are invalid UTF-8 or a NUL.
const PIECES: &[&[u8]] = &[
    b"a",
    b"b",
    b"fn x()",
    b" ",
    b"  ",
    b"\t",
    b"\n",
    b"\n",
    b"\n",
    b"\r\n",
    b"\r",
    b"}",
    "\u{e9}".as_bytes(),
    "\u{65e5}\u{672c}".as_bytes(),
    "\u{1f389}".as_bytes(),
    b"\x1b[31m",
    "\u{202e}".as_bytes(),
    b"\xff",
    b"\xc3",
    b"\0",
];
const VALID_PIECES: usize = PIECES.len() - 3;

fn random_pieces(rng: &mut Lcg, count: usize, valid: bool) -> Vec<&'static [u8]> {
    let choices = if valid { VALID_PIECES } else { PIECES.len() };
    let mut pieces = Vec::with_capacity(count);
    for _ in 0..count {
        let piece = PIECES[rng.below(choices)];
        // Keep NULs rare so most cases get past the binary check.
        if piece != b"\0" || rng.below(8) == 0 {
            pieces.push(piece);
        }
    }
    pieces
}

/// Random edits. Valid cases edit whole pieces and stay UTF-8; the others edit single bytes,
/// which may split characters.
fn mutate(rng: &mut Lcg, pieces: &[&'static [u8]], valid: bool) -> Vec<u8> {
    if valid {
        let mut out = pieces.to_vec();
        for _ in 0..1 + rng.below(6) {
            let at = rng.below(out.len() + 1);
            let count = 1 + rng.below(6);
            match rng.below(3) {
                0 => {
                    let insert = random_pieces(rng, count, true);
                    out.splice(at..at, insert);
                }
                1 => {
                    out.drain(at..(at + count).min(out.len()));
                }
                _ => {
                    let replacement = random_pieces(rng, 1, true);
                    out.splice(at..(at + 1).min(out.len()), replacement);
                }
            }
        }
        return out.concat();
    }
    let mut out = pieces.concat();
    for _ in 0..1 + rng.below(6) {
        let at = rng.below(out.len() + 1);
        match rng.below(3) {
            0 => {
                let count = 1 + rng.below(6);
                let insert = random_pieces(rng, count, false).concat();
                out.splice(at..at, insert);
            }
            1 => {
                let end = (at + rng.below(12)).min(out.len());
                out.drain(at..end);
            }
            _ => {
                if let Some(byte) = out.get_mut(at) {
                    *byte = b"xy\n\r\t\xe6"[rng.below(6)];
                }
            }
        }
    }
    out
}

/// Rebuilds the new text from the old one and the hunks, checking the hunks against the old
/// text on the way.
fn replay(old: &str, hunks: &[Hunk]) -> String {
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let mut out = String::new();
    let mut next = 0;
    for hunk in hunks {
        let first = if hunk.old_len == 0 {
            hunk.old_start
        } else {
            hunk.old_start - 1
        };
        out.extend(old_lines[next..first].iter().copied());
        let mut at = first;
        for line in &hunk.lines {
            let full = format!("{}{}", line.text, line.ending());
            match line.kind {
                LineKind::Context | LineKind::Removed => {
                    assert_eq!(
                        old_lines[at],
                        full,
                        "hunk line does not match old line {}",
                        at + 1
                    );
                    assert_eq!(line.old_number, Some(at + 1));
                    if line.kind == LineKind::Context {
                        out.push_str(&full);
                    }
                    at += 1;
                }
                LineKind::Added => out.push_str(&full),
            }
        }
        assert_eq!(at - first, hunk.old_len);
        next = at;
    }
    out.extend(old_lines[next..].iter().copied());
    out
}

fn check_counts(diff: &FileDiff) {
    let mut added = 0;
    let mut removed = 0;
    for hunk in &diff.hunks {
        let count = |kind| hunk.lines.iter().filter(|line| line.kind == kind).count();
        let context = count(LineKind::Context);
        assert_eq!(hunk.old_len, context + count(LineKind::Removed));
        assert_eq!(hunk.new_len, context + count(LineKind::Added));
        added += count(LineKind::Added);
        removed += count(LineKind::Removed);
    }
    assert_eq!((diff.added, diff.removed), (added, removed));
}

#[test]
fn random_byte_edits_never_panic_and_replay() {
    let mut rng = Lcg(0x6b65_656c);
    let mut replayed = 0;
    for _ in 0..1500 {
        let valid = rng.below(2) == 0;
        let count = rng.below(120);
        let pieces = random_pieces(&mut rng, count, valid);
        let old = pieces.concat();
        let new = mutate(&mut rng, &pieces, valid);
        let (old_side, new_side) = match rng.below(10) {
            0 => (None, Some(new.as_slice())),
            1 => (Some(old.as_slice()), None),
            _ => (Some(old.as_slice()), Some(new.as_slice())),
        };
        let diff = match FileDiff::compute("p", old_side, new_side) {
            Ok(diff) => diff,
            Err(DiffError::Binary { .. }) => {
                assert!(
                    old_side
                        .into_iter()
                        .chain(new_side)
                        .any(|side| side.contains(&0))
                );
                continue;
            }
            Err(err) => panic!("unexpected error: {err}"),
        };
        let diff = if rng.below(5) == 0 {
            diff.renamed("q")
        } else {
            diff
        };
        check_counts(&diff);
        let _ = (diff.unified(), diff.summary());
        let acp = diff.acp();
        assert!(!acp.bounded, "small inputs keep their full texts");
        let lossy = |side: Option<&[u8]>| side.map(|b| String::from_utf8_lossy(b).into_owned());
        assert_eq!(acp.old_text, lossy(old_side));
        assert_eq!(acp.new_text, lossy(new_side).unwrap_or_default());
        for _ in 0..3 {
            let style = TerminalStyle {
                color: rng.below(2) == 0,
                width: rng.below(100),
                tab_width: rng.below(9),
            };
            let rendered = diff.render_terminal(&style);
            if !style.color {
                assert!(!rendered.contains('\x1b'));
            }
        }
        let old_text = std::str::from_utf8(old_side.unwrap_or_default());
        let new_text = std::str::from_utf8(new_side.unwrap_or_default());
        if let (Ok(old_text), Ok(new_text)) = (old_text, new_text) {
            assert!(!diff.lossy);
            assert_eq!(replay(old_text, &diff.hunks), new_text);
            replayed += 1;
        } else {
            assert!(diff.lossy);
        }
    }
    assert!(replayed > 200, "only {replayed} cases were valid UTF-8");
}

#[test]
fn large_unrelated_repetitive_texts_finish_and_replay() {
    let mut rng = Lcg(7);
    let mut noise = |lines: usize| -> String {
        (0..lines)
            .map(|_| ["a\n", "b\n", "}\n", "\n"][rng.below(4)])
            .collect()
    };
    let (old, new) = (noise(5_000), noise(5_000));
    let diff = FileDiff::compute("n", Some(old.as_bytes()), Some(new.as_bytes())).unwrap();
    check_counts(&diff);
    assert_eq!(replay(&old, &diff.hunks), new);
}

#[test]
fn many_scattered_edits_in_a_large_file_replay() {
    let old: String = (0..20_000)
        .map(|n| format!("line {n} of the file\n"))
        .collect();
    let mut rng = Lcg(3);
    let mut lines: Vec<String> = old.lines().map(str::to_owned).collect();
    for edit in 0..300 {
        let at = rng.below(lines.len());
        match rng.below(3) {
            0 => lines.insert(at, format!("inserted {edit}")),
            1 => {
                lines.remove(at);
            }
            _ => lines[at].push_str(" (edited)"),
        }
    }
    let new = lines.join("\n") + "\n";
    let diff = FileDiff::compute("big", Some(old.as_bytes()), Some(new.as_bytes())).unwrap();
    check_counts(&diff);
    assert_eq!(replay(&old, &diff.hunks), new);
    assert!(old.len() < ACP_FULL_TEXT_LIMIT && !diff.acp().bounded);
}
