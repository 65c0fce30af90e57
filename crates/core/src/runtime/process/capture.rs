//! What a command printed, kept as the model will read it: a bounded head and tail in memory,
//! the whole output in a sidecar file past the cap, and output streamed as text without
//! splitting a character; and the reads that feed it from the command's pipe.

use std::path::{Path, PathBuf};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::unix::pipe;
use tokio::time::Instant;

use super::{MARKER_RESERVE, OutputCapture, READ_CHUNK, SIDECAR_MAX_BYTES};
use crate::contract::{InternalError, ProgressSink, ToolProgress};

/// Keeps the first `limit` bytes and a tail of `limit / 2` in memory; past `limit`, writes
/// everything to the sidecar file (up to [`SIDECAR_MAX_BYTES`]).
pub(super) struct Collector {
    limit: usize,
    head: Vec<u8>,
    tail: Vec<u8>,
    total: u64,
    sidecar: CappedFile,
    sidecar_note: Option<String>,
    fault: Option<InternalError>,
}

/// What the model reads when Keel could not save a command's whole output.
const SIDECAR_FAULT_NOTE: &str = "the whole output could not be saved (internal error in Keel; \
    the user has been shown the details)";

impl Collector {
    pub(super) fn new(capture: OutputCapture) -> Self {
        Self {
            limit: capture.limit,
            head: Vec::new(),
            tail: Vec::new(),
            total: 0,
            sidecar: CappedFile::new(capture.sidecar),
            sidecar_note: None,
            fault: None,
        }
    }

    /// The sidecar failed: a failure of Keel's own state, not of the command.
    pub(super) fn sidecar_failed(&mut self, error: std::io::Error) {
        self.sidecar_note = Some(SIDECAR_FAULT_NOTE.to_owned());
        self.fault.get_or_insert(InternalError {
            context: "saving a command's whole output",
            source: std::sync::Arc::new(error),
        });
    }

    pub(super) fn tail_keep(&self) -> usize {
        self.limit / 2
    }

    pub(super) async fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let room = self.limit.saturating_sub(self.head.len()).min(chunk.len());
        let (to_head, rest) = chunk.split_at(room);
        self.head.extend_from_slice(to_head);
        self.tail.extend_from_slice(chunk);
        let keep = self.tail_keep();
        if self.tail.len() > keep.saturating_mul(2).max(READ_CHUNK) {
            let excess = self.tail.len() - keep;
            self.tail.drain(..excess);
        }
        if rest.is_empty() || self.sidecar_note.is_some() {
            return;
        }
        if !self.sidecar.is_open() {
            let head = std::mem::take(&mut self.head);
            self.write_sidecar(&head).await;
            self.head = head;
            if self.sidecar_note.is_some() {
                return;
            }
        }
        self.write_sidecar(rest).await;
    }

    async fn write_sidecar(&mut self, bytes: &[u8]) {
        match self.sidecar.write(bytes).await {
            Ok(Written::All) => {}
            Ok(Written::Cut) => self.sidecar_note = Some(CappedFile::cut_note()),
            Err(e) => self.sidecar_failed(e),
        }
    }

    /// The model's text, the total, the sidecar path (when one was written) and a note on it.
    pub(super) async fn finish(
        mut self,
    ) -> (
        String,
        u64,
        Option<PathBuf>,
        Option<String>,
        Option<InternalError>,
    ) {
        if self.total <= self.limit as u64 {
            return (
                String::from_utf8_lossy(&self.head).into_owned(),
                self.total,
                None,
                None,
                None,
            );
        }
        let output_path = match self.sidecar.flush().await {
            Ok(path) => path,
            Err(e) => {
                self.sidecar_failed(e);
                None
            }
        };
        // Head and tail share the cap with the marker line between them.
        let half = self.limit.saturating_sub(MARKER_RESERVE) / 2;
        let head = cut_head(&self.head[..self.head.len().min(half)]);
        let tail = cut_tail(&self.tail[self.tail.len().saturating_sub(half)..]);
        let omitted = self.total - (head.len() + tail.len()) as u64;
        let mut text = String::from_utf8_lossy(head).into_owned();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("[... {omitted} bytes omitted ...]\n"));
        text.push_str(&String::from_utf8_lossy(tail));
        (text, self.total, output_path, self.sidecar_note, self.fault)
    }
}

/// A command's whole output on disk: the file is created at the first write and holds at most
/// [`SIDECAR_MAX_BYTES`]; what comes past that is left out.
#[derive(Debug)]
pub(in crate::runtime) struct CappedFile {
    path: PathBuf,
    file: Option<tokio::fs::File>,
    written: u64,
}

/// What [`CappedFile::write`] kept of the bytes it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::runtime) enum Written {
    All,
    /// The file reached its cap: the rest of these bytes, and any later, are left out.
    Cut,
}

impl CappedFile {
    pub(in crate::runtime) fn new(path: PathBuf) -> Self {
        Self {
            path,
            file: None,
            written: 0,
        }
    }

    pub(in crate::runtime) fn path(&self) -> &Path {
        &self.path
    }

    fn is_open(&self) -> bool {
        self.file.is_some()
    }

    /// Appends what fits of `bytes`, creating the file (never following a symlink) first.
    pub(in crate::runtime) async fn write(&mut self, bytes: &[u8]) -> std::io::Result<Written> {
        let file = match &mut self.file {
            Some(file) => file,
            None => self.file.insert(open_sidecar(&self.path).await?),
        };
        let room = SIDECAR_MAX_BYTES.saturating_sub(self.written);
        let take = usize::try_from(room).unwrap_or(usize::MAX).min(bytes.len());
        file.write_all(&bytes[..take]).await?;
        self.written += take as u64;
        Ok(if take < bytes.len() {
            Written::Cut
        } else {
            Written::All
        })
    }

    /// Flushes what was written; the file's path when there is one.
    pub(in crate::runtime) async fn flush(&mut self) -> std::io::Result<Option<PathBuf>> {
        match &mut self.file {
            Some(file) => file.flush().await.map(|()| Some(self.path.clone())),
            None => Ok(None),
        }
    }

    /// The note the model reads once the file was cut.
    pub(in crate::runtime) fn cut_note() -> String {
        format!(
            "the sidecar file holds only the first {} MiB",
            SIDECAR_MAX_BYTES / (1024 * 1024)
        )
    }
}

/// The next chunk `reader` gives into `buffer` before `until`: its length, or `None` at the
/// pipe's end, an error, or `until` (when a process escaped the group and holds the pipe open).
pub(in crate::runtime) async fn read_before(
    reader: &mut pipe::Receiver,
    buffer: &mut [u8],
    until: Instant,
) -> Option<usize> {
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(until) => return None,
            read = reader.read(buffer) => match read {
                Ok(0) => return None,
                Ok(n) => return Some(n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            },
        }
    }
}

#[expect(
    clippy::disallowed_types,
    reason = "the runtime is where ambient authority lives"
)]
pub(in crate::runtime) async fn open_sidecar(path: &Path) -> std::io::Result<tokio::fs::File> {
    tokio::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .await
}

/// A head cut after its last line end when one is in its last quarter, else at a char boundary.
pub(super) fn cut_head(bytes: &[u8]) -> &[u8] {
    let end = bytes.len() - incomplete_suffix(bytes);
    let bytes = &bytes[..end];
    match bytes.iter().rposition(|&b| b == b'\n') {
        Some(nl) if nl + 1 >= end - end / 4 => &bytes[..=nl],
        _ => bytes,
    }
}

/// A tail started after its first line end when one is in its first quarter, else at a char
/// boundary.
pub(super) fn cut_tail(bytes: &[u8]) -> &[u8] {
    let mut start = 0;
    while start < bytes.len() && is_continuation(bytes.get(start)) {
        start += 1;
    }
    let bytes = &bytes[start..];
    match bytes.iter().position(|&b| b == b'\n') {
        Some(nl) if nl < bytes.len() / 4 => &bytes[nl + 1..],
        _ => bytes,
    }
}

fn is_continuation(byte: Option<&u8>) -> bool {
    byte.is_some_and(|b| b & 0xC0 == 0x80)
}

/// Turns a byte stream into text chunks without splitting a UTF-8 sequence across chunks.
#[derive(Debug, Default)]
pub(super) struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    pub(super) fn push(&mut self, chunk: &[u8]) -> String {
        self.pending.extend_from_slice(chunk);
        let keep = incomplete_suffix(&self.pending);
        let complete = self.pending.len() - keep;
        let text = String::from_utf8_lossy(&self.pending[..complete]).into_owned();
        self.pending.drain(..complete);
        text
    }
}

/// Length of an unfinished UTF-8 sequence at the end of `bytes` (0 if none).
fn incomplete_suffix(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let byte = bytes[bytes.len() - back];
        if byte & 0xC0 == 0x80 {
            continue;
        }
        let needed = match byte {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

/// Reads a chunk from the pipe; pends forever once the pipe is closed.
pub(in crate::runtime) async fn read_chunk(
    output: &mut Option<pipe::Receiver>,
    buffer: &mut [u8],
) -> std::io::Result<usize> {
    match output {
        Some(reader) => reader.read(buffer).await,
        None => std::future::pending().await,
    }
}

/// Reads init's line from the done FIFO; pends forever without one.
pub(super) async fn read_done(done: &mut Option<pipe::Receiver>) -> std::io::Result<String> {
    let Some(reader) = done else {
        return std::future::pending().await;
    };
    // One line of a few dozen bytes, written at once (a FIFO write under `PIPE_BUF` is atomic).
    let mut line = [0u8; 256];
    let n = reader.read(&mut line).await?;
    Ok(String::from_utf8_lossy(&line[..n]).into_owned())
}

/// Where a command's output goes once its process is done: the buffer it is read into, and
/// what takes each chunk.
pub(super) struct Sink<'a> {
    pub(super) buffer: &'a mut [u8],
    pub(super) collector: &'a mut Collector,
    pub(super) stream: &'a mut Utf8Stream,
    pub(super) progress: &'a ProgressSink,
}

impl Sink<'_> {
    /// Takes what the pipe holds now, without waiting for its end (which comes with the
    /// helper's own exit).
    pub(super) async fn read_what_is_there(&mut self, reader: &pipe::Receiver) {
        loop {
            match reader.try_read(self.buffer) {
                Ok(0) => break,
                Ok(n) => {
                    accept(
                        &self.buffer[..n],
                        self.collector,
                        self.stream,
                        self.progress,
                    )
                    .await
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    }

    /// Takes what is left in the pipe until its end or `until` (in case a process escaped the
    /// group and holds the pipe open).
    pub(super) async fn drain(&mut self, reader: &mut pipe::Receiver, until: Instant) {
        while let Some(n) = read_before(reader, self.buffer, until).await {
            accept(
                &self.buffer[..n],
                self.collector,
                self.stream,
                self.progress,
            )
            .await;
        }
    }
}

pub(super) async fn accept(
    chunk: &[u8],
    collector: &mut Collector,
    stream: &mut Utf8Stream,
    progress: &ProgressSink,
) {
    let text = stream.push(chunk);
    if !text.is_empty() {
        progress.send(ToolProgress::Output(text));
    }
    collector.push(chunk).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn utf8_stream_never_splits_a_character() {
        let mut stream = Utf8Stream::default();
        let bytes = "aé€😀b".as_bytes();
        let mut out = String::new();
        for byte in bytes {
            out.push_str(&stream.push(std::slice::from_ref(byte)));
        }
        assert_eq!(out, "aé€😀b");
        assert_eq!(incomplete_suffix(b"ab"), 0);
        assert_eq!(incomplete_suffix(&[b'a', 0xE2, 0x82]), 2);
    }

    #[test]
    pub(super) fn head_and_tail_cut_on_lines_and_chars() {
        assert_eq!(cut_head(b"aaaa\nbb"), b"aaaa\nbb");
        assert_eq!(cut_head(b"aaaaaaa\nb"), b"aaaaaaa\n");
        assert_eq!(cut_head("aé".as_bytes().get(..2).unwrap_or_default()), b"a");
        assert_eq!(cut_tail(b"x\nyyyyyyy"), b"yyyyyyy");
        assert_eq!(cut_tail(&"é".as_bytes()[1..]), b"");
    }

    #[tokio::test]
    #[expect(
        clippy::disallowed_methods,
        reason = "the test's sidecar goes to a temp dir"
    )]
    pub(super) async fn collector_keeps_head_and_tail_and_spills_everything() {
        let dir = tempfile::tempdir().unwrap();
        let sidecar = dir.path().join("out.txt");
        let mut collector = Collector::new(OutputCapture {
            limit: 160,
            sidecar: sidecar.clone(),
        });
        let lines: String = (0..100).map(|i| format!("line {i}\n")).collect();
        for chunk in lines.as_bytes().chunks(7) {
            collector.push(chunk).await;
        }
        let (text, total, path, note, _) = collector.finish().await;
        assert_eq!(total, lines.len() as u64);
        assert_eq!(path.as_deref(), Some(sidecar.as_path()));
        assert_eq!(note, None);
        assert!(text.len() <= 160, "{text}");
        assert!(text.starts_with("line 0\n"), "{text}");
        assert!(text.ends_with("line 99\n"), "{text}");
        assert!(text.contains("bytes omitted"), "{text}");
        #[expect(clippy::disallowed_methods, reason = "the test reads the sidecar back")]
        let spilled = std::fs::read_to_string(&sidecar).unwrap();
        assert_eq!(spilled, lines);
    }
}
