//! The runtime's file operations against a hostile file system: a directory swapped for a
//! symlink to the outside while the runtime reads and writes (a thread exchanging the two
//! names with `renameat2(RENAME_EXCHANGE)`, so the path always exists), hard links, and the
//! editor's file backend.
//!
//! Layout: `<tmp>/ws` is the workspace with `ws/sub/f`; `<tmp>/outside` holds `f` (a secret)
//! and is what `ws/sub` is swapped with.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt as _, symlink};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use keel_core::capability::RequirementSet;
use keel_core::runtime::AccessError;
use keel_core::runtime::{FileBackend, Runtime, RuntimeConfig};

use super::tool_support::workspace_scope;

const SECRET: &str = "outside secret\n";
const INSIDE: &str = "inside\n";
const ROUNDS: usize = 1000;

struct World {
    _dir: tempfile::TempDir,
    base: PathBuf,
    ws: PathBuf,
    outside: PathBuf,
    runtime: Runtime,
}

impl World {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(dir.path()).unwrap();
        let ws = base.join("ws");
        let outside = base.join("outside");
        fs::create_dir_all(ws.join("sub")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(ws.join("sub/f"), INSIDE).unwrap();
        fs::write(outside.join("f"), SECRET).unwrap();
        let runtime = runtime(&ws, &base.join("scratch"), workspace_scope());
        Self {
            _dir: dir,
            base,
            ws,
            outside,
            runtime,
        }
    }

    /// Everything under `outside`, path → content.
    fn outside_listing(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for entry in fs::read_dir(&self.outside).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            let content = fs::read_to_string(entry.path()).unwrap_or_default();
            out.insert(name, content);
        }
        out
    }
}

fn runtime(ws: &Path, scratch: &Path, requirements: RequirementSet) -> Runtime {
    Runtime::new(RuntimeConfig {
        roots: vec![ws.to_path_buf()],
        requirements,
        scratch_dir: scratch.to_path_buf(),
        ..RuntimeConfig::default()
    })
    .unwrap()
}

/// A thread that keeps exchanging `ws/sub` (the real directory) with `ws/swap` (a symlink to
/// the outside directory) until stopped. `ready` is set after its first exchange, so the
/// caller starts only once swapping is under way; it returns how many exchanges it made.
struct Swapper {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<usize>>,
}

impl Drop for Swapper {
    /// A failing test stops the thread before its directory goes away.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Swapper {
    fn start(world: &World) -> Self {
        symlink(&world.outside, world.ws.join("swap")).unwrap();
        let ws = world.ws.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let ready = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            let ready = ready.clone();
            std::thread::spawn(move || {
                let dir = fs::File::open(&ws).unwrap();
                let mut swaps = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    nix::fcntl::renameat2(
                        &dir,
                        "sub",
                        &dir,
                        "swap",
                        nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                    )
                    .unwrap();
                    swaps += 1;
                    ready.store(true, Ordering::Relaxed);
                    std::thread::yield_now();
                }
                // Leave the real directory at `sub`.
                if fs::symlink_metadata(ws.join("sub"))
                    .unwrap()
                    .file_type()
                    .is_symlink()
                {
                    nix::fcntl::renameat2(
                        &dir,
                        "sub",
                        &dir,
                        "swap",
                        nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                    )
                    .unwrap();
                }
                swaps
            })
        };
        while !ready.load(Ordering::Relaxed) {
            std::thread::yield_now();
        }
        Self {
            stop,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_symlink_during_1000_writes_lands_nothing_outside() {
    let world = World::new();
    let target = world.ws.join("sub/f");
    // Checked once, as a tool does before it writes.
    let canonical = world
        .runtime
        .resolve_checked("sub/f", keel_core::capability::Access::Write);
    assert_eq!(canonical.unwrap(), target);
    let swapper = Swapper::start(&world);
    let (mut written, mut refused) = (0usize, 0usize);
    for i in 0..ROUNDS {
        match world
            .runtime
            .write(&target, format!("write {i}\n").as_bytes())
            .await
        {
            Ok(()) => written += 1,
            Err(AccessError::Stale(message)) => {
                assert!(message.contains("changed while writing"), "{message}");
                refused += 1;
            }
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    let swaps = swapper.stop();
    eprintln!("{ROUNDS} writes: {written} written, {refused} refused; {swaps} swaps");
    assert!(swaps > 0);
    assert_eq!(written + refused, ROUNDS);
    assert_eq!(
        world.outside_listing(),
        BTreeMap::from([("f".to_owned(), SECRET.to_owned())]),
        "nothing was written outside the workspace"
    );
    // What was written went into the real directory, and left no temporary file behind.
    let names: Vec<String> = fs::read_dir(world.ws.join("sub"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["f".to_owned()]);
    if written > 0 {
        assert!(fs::read_to_string(&target).unwrap().starts_with("write "));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_symlink_during_1000_reads_reads_nothing_outside() {
    let world = World::new();
    let target = world.ws.join("sub/f");
    let swapper = Swapper::start(&world);
    let (mut read, mut refused) = (0usize, 0usize);
    for i in 0..ROUNDS {
        // Both the whole read and the ranged read (large files) go through the same open.
        let result = if i % 2 == 0 {
            world.runtime.read(&target).await
        } else {
            world.runtime.read_range(&target, 0, 64).await
        };
        match result {
            Ok(bytes) => {
                assert_eq!(String::from_utf8(bytes).unwrap(), INSIDE);
                read += 1;
            }
            Err(AccessError::Stale(message)) => {
                assert!(
                    message.contains("changed while it was being opened"),
                    "{message}"
                );
                refused += 1;
            }
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    let swaps = swapper.stop();
    eprintln!("{ROUNDS} reads: {read} read, {refused} refused; {swaps} swaps");
    assert!(swaps > 0);
    assert_eq!(read + refused, ROUNDS);
}

/// The same race made deterministic: the path is checked, then swapped, then used.
#[tokio::test]
async fn a_symlink_swapped_in_between_check_and_use_is_refused() {
    let world = World::new();
    let checked = world
        .runtime
        .resolve_checked("sub/f", keel_core::capability::Access::Write)
        .unwrap();
    let metadata_before = world.runtime.metadata(&checked).await.unwrap();
    assert!(metadata_before.is_file());
    fs::rename(world.ws.join("sub"), world.base.join("moved")).unwrap();
    symlink(&world.outside, world.ws.join("sub")).unwrap();

    let read = world.runtime.read(&checked).await.unwrap_err().to_string();
    assert!(read.contains("changed while it was being opened"), "{read}");
    let ranged = world.runtime.read_range(&checked, 0, 10).await.unwrap_err();
    assert!(
        ranged
            .to_string()
            .contains("changed while it was being opened")
    );
    assert!(world.runtime.metadata(&checked).await.is_err());
    let write = world.runtime.write(&checked, b"pwned\n").await.unwrap_err();
    assert!(
        write.to_string().contains("changed while writing"),
        "{write}"
    );
    // A new file under the swapped directory is refused the same way.
    let created = world.runtime.write(&world.ws.join("sub/new"), b"x").await;
    assert!(created.is_err());
    // A new directory chain under it too: the walk meets the symlink before any mkdir.
    let deep = world.runtime.write(&world.ws.join("sub/a/b/c"), b"x").await;
    assert!(deep.is_err());
    assert_eq!(
        world.outside_listing(),
        BTreeMap::from([("f".to_owned(), SECRET.to_owned())])
    );

    // The final component swapped for a symlink: read refused, write replaces the link.
    fs::remove_file(world.ws.join("sub")).unwrap();
    fs::rename(world.base.join("moved"), world.ws.join("sub")).unwrap();
    fs::remove_file(world.ws.join("sub/f")).unwrap();
    symlink(world.outside.join("f"), world.ws.join("sub/f")).unwrap();
    assert!(world.runtime.read(&checked).await.is_err());
    world.runtime.write(&checked, b"mine\n").await.unwrap();
    assert_eq!(fs::read_to_string(world.outside.join("f")).unwrap(), SECRET);
    let meta = fs::symlink_metadata(&checked).unwrap();
    assert!(meta.is_file(), "the symlink itself was replaced");
    assert_eq!(fs::read_to_string(&checked).unwrap(), "mine\n");
}

#[tokio::test]
async fn a_fifo_swapped_in_for_a_file_does_not_block_the_read() {
    let world = World::new();
    let target = world.ws.join("sub/f");
    fs::remove_file(&target).unwrap();
    nix::unistd::mkfifo(&target, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let error = world.runtime.read(&target).await.unwrap_err().to_string();
    assert!(error.contains("not a regular file"), "{error}");
}

#[tokio::test]
async fn hard_linked_files_are_not_read_without_approval() {
    let world = World::new();
    // A workspace name for the outside secret (same file system, so a hard link works).
    let linked = world.ws.join("linked.txt");
    fs::hard_link(world.outside.join("f"), &linked).unwrap();
    assert_eq!(world.runtime.link_count(&linked), Some(2));
    assert_eq!(world.runtime.link_count(&world.ws.join("sub/f")), Some(1));
    assert_eq!(world.runtime.link_count(&world.ws.join("sub")), None);

    let error = world.runtime.read(&linked).await.unwrap_err().to_string();
    assert!(error.contains("has 2 hard links"), "{error}");
    assert!(error.contains("approval"), "{error}");
    assert!(world.runtime.read_range(&linked, 0, 5).await.is_err());

    let approved = world.runtime.allowing_linked_reads();
    assert_eq!(approved.read(&linked).await.unwrap(), SECRET.as_bytes());
    // The permission is the call's, not the session's.
    assert!(world.runtime.read(&linked).await.is_err());
}

#[tokio::test]
async fn writing_a_hard_linked_file_replaces_the_link_instead_of_writing_through_it() {
    let world = World::new();
    let linked = world.ws.join("linked.txt");
    fs::hard_link(world.outside.join("f"), &linked).unwrap();
    world
        .runtime
        .write(&linked, b"new content\n")
        .await
        .unwrap();
    assert_eq!(fs::read_to_string(&linked).unwrap(), "new content\n");
    assert_eq!(fs::read_to_string(world.outside.join("f")).unwrap(), SECRET);
    assert_eq!(fs::metadata(&linked).unwrap().nlink(), 1);
    assert_eq!(fs::metadata(world.outside.join("f")).unwrap().nlink(), 1);
}

/// red2: a write keeps a file's permission bits but not its set-user-id and set-group-id bits,
/// as the kernel clears them when a process without CAP_FSETID writes a file: rewritten by the
/// model, a set-id program would otherwise run new code with its owner's rights.
#[tokio::test]
async fn a_write_keeps_the_mode_but_drops_set_id_bits() {
    use std::os::unix::fs::PermissionsExt as _;
    let world = World::new();
    let tool = world.ws.join("tool.sh");
    fs::write(&tool, "#!/bin/sh\necho old\n").unwrap();
    fs::set_permissions(&tool, fs::Permissions::from_mode(0o6755)).unwrap();
    assert_eq!(fs::metadata(&tool).unwrap().mode() & 0o7777, 0o6755);
    world
        .runtime
        .write(&tool, b"#!/bin/sh\nid\n")
        .await
        .unwrap();
    assert_eq!(fs::read_to_string(&tool).unwrap(), "#!/bin/sh\nid\n");
    assert_eq!(fs::metadata(&tool).unwrap().mode() & 0o7777, 0o755);
}

/// An editor that records what it is asked to write (and writes nothing).
#[derive(Debug, Default)]
struct Editor {
    writes: Mutex<Vec<PathBuf>>,
    reads: AtomicUsize,
}

impl FileBackend for Editor {
    fn read_text<'a>(&'a self, _path: &'a Path) -> BoxFuture<'a, Option<Result<String, String>>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        Box::pin(async { Some(Ok("editor buffer\n".to_owned())) })
    }

    fn write_text<'a>(
        &'a self,
        path: &'a Path,
        _content: &'a str,
    ) -> BoxFuture<'a, Option<Result<(), String>>> {
        self.writes.lock().unwrap().push(path.to_path_buf());
        Box::pin(async { Some(Ok(())) })
    }
}

#[tokio::test]
async fn the_editor_is_not_used_for_hard_linked_files() {
    let world = World::new();
    let editor = Arc::new(Editor::default());
    let runtime = world.runtime.with_backends(Some(editor.clone()), None);
    let linked = world.ws.join("linked.txt");
    fs::hard_link(world.outside.join("f"), &linked).unwrap();
    let plain = world.ws.join("sub/f");

    runtime
        .write(&plain, b"through the editor\n")
        .await
        .unwrap();
    runtime.write(&linked, b"on the disk\n").await.unwrap();
    assert_eq!(*editor.writes.lock().unwrap(), vec![plain.clone()]);
    assert_eq!(
        fs::read_to_string(&plain).unwrap(),
        INSIDE,
        "the editor wrote it"
    );
    assert_eq!(fs::read_to_string(&linked).unwrap(), "on the disk\n");
    assert_eq!(fs::read_to_string(world.outside.join("f")).unwrap(), SECRET);

    // Reading a hard-linked file through the editor is refused like a disk read.
    fs::hard_link(world.outside.join("f"), world.ws.join("again.txt")).unwrap();
    let through_editor = runtime
        .read_editor_text(&world.ws.join("again.txt"))
        .await
        .unwrap();
    assert!(
        through_editor
            .unwrap_err()
            .to_string()
            .contains("hard links")
    );
    assert_eq!(editor.reads.load(Ordering::Relaxed), 0);
    assert_eq!(
        runtime
            .read_editor_text(&plain)
            .await
            .unwrap()
            .unwrap()
            .as_str(),
        "editor buffer\n"
    );
}

#[tokio::test]
async fn a_failed_open_keeps_the_os_error_as_its_source() {
    let world = World::new();
    let missing = world.ws.join("sub/missing.txt");
    let error = world.runtime.open_read(&missing).unwrap_err();
    assert!(
        matches!(error, keel_core::runtime::FileError::Io { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().ends_with("no such file or directory"),
        "{error}"
    );
    let source = std::error::Error::source(&error)
        .and_then(|source| source.downcast_ref::<std::io::Error>())
        .map(std::io::Error::kind);
    assert_eq!(source, Some(std::io::ErrorKind::NotFound));
    // The runtime's error, which is the tool's, carries it on, its text unchanged.
    let text = error.to_string();
    let tool_error: keel_core::tool::ToolError = AccessError::from(error);
    assert_eq!(tool_error.to_string(), text);
    assert!(std::error::Error::source(&tool_error).is_some());
}
