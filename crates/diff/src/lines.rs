//! Bytes to lines: splitting, fingerprinting, and finding the region worth diffing.
//!
//! Everything here works on raw bytes so that a line diff never depends on how the text
//! decodes: two lines are equal exactly when their bytes (ending included) are equal.

use std::ops::Range;

/// Lines of context shown around each change, as git does by default.
pub(crate) const CONTEXT: usize = 3;

const NEWLINES: u64 = 0x0a0a_0a0a_0a0a_0a0a;
const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const MIX: u64 = 0x9e37_79b9_7f4a_7c15;

/// `0x80` in every byte of `word` that is zero, `0` elsewhere (exact: no false positives).
#[inline]
fn zero_bytes(word: u64) -> u64 {
    !(((word & LOW7).wrapping_add(LOW7)) | word | LOW7)
}

/// A mask of the low `count` bytes of a word (`count` in 1..=8).
#[inline]
fn low_bytes_mask(count: usize) -> u64 {
    u64::MAX >> (64 - 8 * count)
}

#[inline]
fn read_word(bytes: &[u8]) -> Option<u64> {
    bytes
        .get(..8)
        .and_then(|w| w.try_into().ok())
        .map(u64::from_le_bytes)
}

/// Indexed lines of one side of the diffed region: where each starts, and a fingerprint of
/// each. It covers consecutive lines from a given line on, and grows on demand.
///
/// Line numbers are region line numbers (0 is the region's first line) throughout, whatever
/// line the index starts at.
///
/// Fingerprints are 32-bit hashes of a line's raw bytes (its ending included). They only
/// guide the alignment: equal fingerprints are checked against the bytes afterwards (see
/// `align`), so a collision can make a diff less tidy but never wrong.
#[derive(Debug)]
pub(crate) struct LineIndex<'a> {
    bytes: &'a [u8],
    /// Region line number of the first indexed line.
    first: usize,
    /// Where the region ends: indexing stops here.
    end: usize,
    /// Offset of each indexed line's first byte, then one past the last one's end.
    bounds: Vec<usize>,
    fingerprints: Vec<u32>,
}

impl<'a> LineIndex<'a> {
    /// Indexes all lines of `bytes[range]`. The range starts at a line start and ends at a line
    /// end or at the end of `bytes`.
    pub(crate) fn new(bytes: &'a [u8], range: Range<usize>) -> Self {
        let mut index = LineIndex::starting_at(bytes, 0, range.start, range.end);
        index.scan(usize::MAX, range.len() / 32 + 2);
        index
    }

    /// An index with nothing indexed yet, whose first line is region line `first`, starting at
    /// byte `start` (a line start), for a region ending at byte `end`.
    pub(crate) fn starting_at(bytes: &'a [u8], first: usize, start: usize, end: usize) -> Self {
        // Room for a typical difference and its anchor, so small spans allocate once.
        const TYPICAL_LINES: usize = 32;
        let mut bounds = Vec::with_capacity(TYPICAL_LINES + 1);
        bounds.push(start);
        LineIndex {
            bytes,
            first,
            end,
            bounds,
            fingerprints: Vec::with_capacity(TYPICAL_LINES),
        }
    }

    /// Indexes until line `line` is indexed or the region ends.
    pub(crate) fn ensure(&mut self, line: usize) {
        let wanted = (line + 1).saturating_sub(self.end_line());
        if wanted > 0 {
            // Grow at least geometrically so that repeated small requests stay linear.
            self.scan(wanted.max(self.len()).max(16), 0);
        }
    }

    /// Indexes up to `count` more lines.
    ///
    /// One pass, eight bytes at a time: each word is checked for a newline and folded into the
    /// current line's hash. Words are read from the line's own start (not aligned to the
    /// buffer), so equal lines hash equally wherever they sit.
    fn scan(&mut self, count: usize, reserve: usize) {
        let start = self.start_of(self.end_line());
        let region = self.bytes.get(start..self.end).unwrap_or_default();
        self.bounds.reserve(reserve);
        self.fingerprints.reserve(reserve);
        let mut added = 0;
        let (mut line_start, mut pos, mut hash) = (0, 0, 0u64);
        while added < count && line_start < region.len() {
            let (word, available) = match region.get(pos..pos + 8).and_then(read_word) {
                Some(word) => (word, 8),
                None => {
                    // Fewer than eight bytes left: a copy padded with newlines, which also
                    // ends a last line that has no newline of its own.
                    let rest = &region[pos..];
                    let mut padded = [b'\n'; 8];
                    padded[..rest.len()].copy_from_slice(rest);
                    (u64::from_le_bytes(padded), rest.len())
                }
            };
            let newlines = zero_bytes(word ^ NEWLINES);
            if newlines == 0 {
                hash = hash.rotate_left(19) ^ word;
                pos += 8;
                continue;
            }
            let taken = (newlines.trailing_zeros() / 8) as usize + 1;
            hash = hash.rotate_left(19) ^ (word & low_bytes_mask(taken));
            pos += taken.min(available);
            let mixed = (hash ^ (pos - line_start) as u64).wrapping_mul(MIX);
            self.fingerprints.push((mixed >> 32) as u32 ^ mixed as u32);
            self.bounds.push(start + pos);
            added += 1;
            line_start = pos;
            hash = 0;
        }
    }

    /// Number of indexed lines.
    pub(crate) fn len(&self) -> usize {
        self.fingerprints.len()
    }

    /// Region line number of the first indexed line.
    pub(crate) fn first(&self) -> usize {
        self.first
    }

    /// Region line number just past the last indexed line.
    pub(crate) fn end_line(&self) -> usize {
        self.first + self.len()
    }

    /// True when every line up to the region end is indexed.
    pub(crate) fn is_complete(&self) -> bool {
        self.bounds.last().is_none_or(|&last| last >= self.end)
    }

    /// Fingerprints of the indexed lines; element 0 is line [`LineIndex::first`].
    pub(crate) fn fingerprints(&self) -> &[u32] {
        &self.fingerprints
    }

    /// Byte offset where line `line` starts (`line` up to [`LineIndex::end_line`]).
    pub(crate) fn start_of(&self, line: usize) -> usize {
        let index = line.saturating_sub(self.first).min(self.bounds.len() - 1);
        self.bounds[index]
    }

    /// The raw bytes of lines `lines` (endings included), as one contiguous slice.
    pub(crate) fn span(&self, lines: Range<usize>) -> &'a [u8] {
        let (start, end) = (self.start_of(lines.start), self.start_of(lines.end));
        self.bytes.get(start..end).unwrap_or_default()
    }

    /// The raw bytes of line `line` (ending included).
    pub(crate) fn line(&self, line: usize) -> &'a [u8] {
        self.span(line..line + 1)
    }
}

/// Number of `\n` bytes in `bytes`.
pub(crate) fn count_newlines(bytes: &[u8]) -> usize {
    let mut chunks = bytes.chunks_exact(8);
    let mut count = 0;
    for chunk in &mut chunks {
        if let Some(word) = read_word(chunk) {
            count += zero_bytes(word ^ NEWLINES).count_ones() as usize;
        }
    }
    count
        + chunks
            .remainder()
            .iter()
            .filter(|&&byte| byte == b'\n')
            .count()
}

/// Length of the longest common prefix of `a` and `b`.
pub(crate) fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 512;
    let limit = a.len().min(b.len());
    let mut same = 0;
    while same + BLOCK <= limit && a[same..same + BLOCK] == b[same..same + BLOCK] {
        same += BLOCK;
    }
    while let (Some(x), Some(y)) = (read_word(&a[same..limit]), read_word(&b[same..limit])) {
        if x != y {
            return same + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        same += 8;
    }
    same + a[same..limit]
        .iter()
        .zip(&b[same..limit])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Length of the longest common suffix of `a` and `b`, at most `limit`.
fn common_suffix_len(a: &[u8], b: &[u8], limit: usize) -> usize {
    const BLOCK: usize = 512;
    let limit = limit.min(a.len()).min(b.len());
    let mut same = 0;
    while same + BLOCK <= limit
        && a[a.len() - same - BLOCK..a.len() - same] == b[b.len() - same - BLOCK..b.len() - same]
    {
        same += BLOCK;
    }
    same + a[..a.len() - same]
        .iter()
        .rev()
        .zip(b[..b.len() - same].iter().rev())
        .take(limit - same)
        .take_while(|(x, y)| x == y)
        .count()
}

/// Start of the line `count` lines before the line starting at `pos` (or 0).
pub(crate) fn back_lines(bytes: &[u8], pos: usize, count: usize) -> usize {
    let mut start = pos;
    for _ in 0..count {
        if start == 0 {
            break;
        }
        // `start - 1` is the previous line's `\n`; find the one before it.
        start = bytes[..start - 1]
            .iter()
            .rposition(|&byte| byte == b'\n')
            .map_or(0, |newline| newline + 1);
    }
    start
}

/// End of the line `count` lines after the line starting at `pos` (or the end of `bytes`).
fn forward_lines(bytes: &[u8], pos: usize, count: usize) -> usize {
    let mut end = pos;
    for _ in 0..count {
        match bytes[end..].iter().position(|&byte| byte == b'\n') {
            Some(newline) => end += newline + 1,
            None => return bytes.len(),
        }
    }
    end
}

/// The part of two texts that needs a line diff: everything but their common leading and
/// trailing lines, widened by [`CONTEXT`] lines each way so hunks find their context inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Region {
    pub(crate) old: Range<usize>,
    pub(crate) new: Range<usize>,
    /// Lines before the region (the same on both sides).
    pub(crate) lines_before: usize,
}

impl Region {
    /// Finds the region, or `None` when the texts are byte-for-byte equal.
    pub(crate) fn find(old: &[u8], new: &[u8]) -> Option<Region> {
        if old == new {
            return None;
        }
        let same_head = common_prefix_len(old, new);
        // Back up to a line start: the bytes before it are whole lines equal on both sides.
        let head = old[..same_head]
            .iter()
            .rposition(|&byte| byte == b'\n')
            .map_or(0, |newline| newline + 1);
        let same_tail = common_suffix_len(old, new, old.len().min(new.len()) - head);
        // Move forward to a line start whose preceding `\n` lies inside the common tail, so it
        // is a line start on both sides.
        let tail_in_old = old.len() - same_tail;
        let tail_start = old[tail_in_old..]
            .iter()
            .position(|&byte| byte == b'\n')
            .map_or(old.len(), |newline| tail_in_old + newline + 1);
        let start = back_lines(old, head, CONTEXT);
        let old_end = forward_lines(old, tail_start, CONTEXT);
        let new_end = old_end + new.len() - old.len();
        Some(Region {
            old: start..old_end,
            new: start..new_end,
            lines_before: count_newlines(&old[..start]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<&str> {
        let index = LineIndex::new(text.as_bytes(), 0..text.len());
        (0..index.len())
            .map(|i| std::str::from_utf8(index.line(i)).unwrap())
            .collect()
    }

    #[test]
    fn splits_keeping_endings() {
        assert_eq!(lines(""), Vec::<&str>::new());
        assert_eq!(lines("a"), ["a"]);
        assert_eq!(lines("a\n"), ["a\n"]);
        assert_eq!(lines("a\r\nb\n\nc"), ["a\r\n", "b\n", "\n", "c"]);
        let long = format!("{}\n{}", "x".repeat(37), "y".repeat(8));
        assert_eq!(lines(&long), [&long[..38], &long[38..]]);
    }

    #[test]
    fn equal_lines_fingerprint_equally_at_any_alignment() {
        for shift in 0..9 {
            let text = format!(
                "{}\nsame line here, long enough\nsame line here, long enough\n",
                "p".repeat(shift)
            );
            let index = LineIndex::new(text.as_bytes(), 0..text.len());
            assert_eq!(index.fingerprints()[1], index.fingerprints()[2]);
            assert_ne!(index.fingerprints()[0], index.fingerprints()[1]);
        }
    }

    #[test]
    fn endings_change_the_fingerprint() {
        let index = LineIndex::new(b"abc\nabc\r\nabc", 0..12);
        let [a, b, c] = index.fingerprints() else {
            panic!("three lines expected");
        };
        assert!(a != b && b != c && a != c);
    }

    #[test]
    fn counts_newlines() {
        assert_eq!(count_newlines(b""), 0);
        assert_eq!(count_newlines(b"\n\n\nabcdefghij\n\nx"), 5);
    }

    #[test]
    fn prefix_and_suffix() {
        let a = vec![7u8; 2000];
        let mut b = a.clone();
        b[1500] = 8;
        assert_eq!(common_prefix_len(&a, &b), 1500);
        assert_eq!(common_suffix_len(&a, &b, 2000), 499);
        assert_eq!(common_suffix_len(&a, &b, 100), 100);
        assert_eq!(common_prefix_len(b"abc", b"abcd"), 3);
    }

    #[test]
    fn region_keeps_context_and_whole_lines() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        let region = Region::find(old.as_bytes(), new.as_bytes()).unwrap();
        assert_eq!(&old[region.old.clone()], "2\n3\n4\n5\n6\n7\n8\n");
        assert_eq!(&new[region.new.clone()], "2\n3\n4\nfive\n6\n7\n8\n");
        assert_eq!(region.lines_before, 1);
        assert_eq!(Region::find(b"same", b"same"), None);
    }

    #[test]
    fn region_tail_starts_on_a_line_start_on_both_sides() {
        // The common tail "c\n" starts mid-line in the new text.
        let region = Region::find(b"a\nc\n", b"a\nbc\n").unwrap();
        assert_eq!(region.old, 0..4);
        assert_eq!(region.new, 0..5);
    }

    #[test]
    fn random_texts_split_like_split_inclusive_and_equal_lines_fingerprint_equally() {
        let mut state = 12_345_u64;
        let mut next = |bound: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % bound
        };
        for _ in 0..500 {
            let len = next(300) as usize;
            let text: Vec<u8> = (0..len)
                .map(|_| b"abcdefghij\n\r"[next(12) as usize])
                .collect();
            // Index a sub-range starting on a line start, as Region does.
            let skip = text
                .iter()
                .position(|&b| b == b'\n')
                .filter(|_| next(2) == 0)
                .map_or(0, |newline| newline + 1);
            let index = LineIndex::new(&text, skip..text.len());
            let expected: Vec<&[u8]> = text[skip..].split_inclusive(|&b| b == b'\n').collect();
            let actual: Vec<&[u8]> = (0..index.len()).map(|i| index.line(i)).collect();
            assert_eq!(actual, expected);
            for (i, line) in actual.iter().enumerate() {
                let alone = LineIndex::new(line, 0..line.len());
                assert_eq!(alone.fingerprints(), &index.fingerprints()[i..=i]);
            }
        }
    }
}
