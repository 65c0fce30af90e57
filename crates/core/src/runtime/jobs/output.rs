//! A job's output: the ring of its last bytes, what the model has read, and the new part of
//! an editor pane's snapshot.

use std::collections::VecDeque;
use std::time::Instant;

use super::JobState;

#[derive(Debug)]
pub(super) struct Output {
    pub(super) ring: VecDeque<u8>,
    pub(super) ring_bytes: usize,
    /// Bytes the command printed in all.
    pub(super) total: u64,
    /// Bytes the model has read (an offset into the whole output).
    pub(super) cursor: u64,
    pub(super) state: JobState,
    pub(super) ended: Option<Instant>,
    /// The sidecar file has been written to.
    pub(super) sidecar_written: bool,
    /// The editor's pane dropped output before Keel read it.
    pub(super) pane_dropped: bool,
    pub(super) fault: Option<String>,
    /// What the sandbox put back once the command was gone.
    pub(super) restored: Vec<String>,
    /// The pane's last snapshot (what `terminal/output` returned), to find the new part.
    pub(super) seen: String,
}

impl Output {
    pub(super) fn new(ring_bytes: usize) -> Self {
        Self {
            ring: VecDeque::new(),
            ring_bytes,
            total: 0,
            cursor: 0,
            state: JobState::Running,
            ended: None,
            sidecar_written: false,
            pane_dropped: false,
            fault: None,
            restored: Vec::new(),
            seen: String::new(),
        }
    }

    pub(super) fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let keep = chunk.len().min(self.ring_bytes);
        let excess = (self.ring.len() + keep).saturating_sub(self.ring_bytes);
        self.ring.drain(..excess);
        self.ring.extend(&chunk[chunk.len() - keep..]);
    }
}

/// How many places [`new_part`] tries as the start of the overlap of two pane snapshots.
pub(super) const MAX_OVERLAP_TRIES: usize = 256;

/// What a pane snapshot adds to the one before.
pub(super) struct NewPart<'a> {
    pub(super) text: &'a str,
    /// Output was dropped between the two snapshots that Keel never saw.
    pub(super) dropped: bool,
}

/// The part of `now` that follows `before`. The editor keeps a bounded buffer, dropping from
/// the start: `now` is then a suffix of `before` followed by new output. The longest such
/// overlap is taken; when none is found, all of `now` is new and some output was lost.
pub(super) fn new_part<'a>(before: &str, now: &'a str, truncated: bool) -> NewPart<'a> {
    if let Some(rest) = now.strip_prefix(before) {
        return NewPart {
            text: rest,
            dropped: false,
        };
    }
    if truncated && let Some(&first) = now.as_bytes().first() {
        // Candidate starts: where `now`'s first byte occurs in `before`, longest overlap first;
        // a bounded number of them, so a repetitive output cannot make this quadratic.
        let candidates = before
            .bytes()
            .enumerate()
            .filter(|&(start, byte)| byte == first && before.is_char_boundary(start))
            .take(MAX_OVERLAP_TRIES);
        for (start, _) in candidates {
            if let Some(rest) = now.strip_prefix(&before[start..]) {
                return NewPart {
                    text: rest,
                    dropped: false,
                };
            }
        }
    }
    NewPart {
        text: now,
        dropped: !before.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_that_extends_the_last_one_adds_its_tail() {
        let part = new_part("abc", "abcdef", false);
        assert_eq!((part.text, part.dropped), ("def", false));
    }

    #[test]
    fn a_truncated_snapshot_adds_what_follows_the_overlap() {
        // The pane dropped "ab" from the front and gained "XY".
        let part = new_part("abcdef", "cdefXY", true);
        assert_eq!((part.text, part.dropped), ("XY", false));
    }

    #[test]
    fn a_snapshot_without_overlap_is_all_new_and_says_output_was_lost() {
        let part = new_part("abc", "xyz", true);
        assert_eq!((part.text, part.dropped), ("xyz", true));
        let first = new_part("", "xyz", false);
        assert_eq!((first.text, first.dropped), ("xyz", false));
    }

    #[test]
    fn the_ring_keeps_the_last_bytes_and_counts_all() {
        let mut output = Output::new(4);
        output.push(b"abc");
        output.push(b"defgh");
        assert_eq!(output.total, 8);
        assert_eq!(output.ring.iter().copied().collect::<Vec<u8>>(), b"efgh");
    }
}
