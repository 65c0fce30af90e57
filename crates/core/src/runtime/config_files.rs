//! Reading and writing Keel's own configuration files (rule files, the trust store).
//!
//! These are not tool accesses: the host reads them at start-up and writes them when the user
//! asks (persisting a rule, trusting a project). They live here because the runtime is the one
//! module allowed ambient file access; nothing here is reachable from a model's tool call.

use std::io;
use std::path::Path;

/// The text of an operator-chosen file (a configuration file, a scripted provider's script).
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn read(path: &Path) -> io::Result<String> {
    std::fs::read_to_string(path)
}

/// The most Keel reads of one settings file, skill, agent definition or tool file (1 MiB).
pub const MAX_FILE: u64 = 1024 * 1024;

/// The text of a settings file (Keel's own or a project's), or `None` when it does not exist.
/// Only a regular file of at most [`MAX_FILE`] bytes is read, and never past that: a symlink to
/// `/dev/zero`, a FIFO or a huge file is an error naming what it is, not an endless read.
/// Symlinks are followed (a user's configuration may live in a dotfiles repository); a
/// project's files go through [`read_project_file`].
#[expect(
    clippy::disallowed_types,
    reason = "the runtime is where ambient authority lives"
)]
pub fn read_if_exists(path: &Path) -> io::Result<Option<String>> {
    use std::os::unix::fs::OpenOptionsExt as _;
    // O_NONBLOCK: opening a FIFO must not wait for a writer.
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    read_bounded(path, file, &meta).map(Some)
}

/// The text of a project file (a skill, an agent definition, a tool file, the project's
/// settings), or `None` when it does not exist: as [`read_if_exists`], and only inside the
/// project `root`. A symlink is followed only to a file inside the project; the file is then
/// opened on its canonical path with no symlink allowed on the way (`fsat`), so a swap after
/// the check fails instead of leading elsewhere.
pub fn read_project_file(root: &Path, path: &Path) -> io::Result<Option<String>> {
    let canonical = match super::paths::resolve(path) {
        Ok(canonical) => canonical,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let root = super::paths::resolve(root)?;
    if !canonical.starts_with(&root) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} leads outside the project (to {}); Keel reads a project's files only inside \
                 it",
                path.display(),
                canonical.display()
            ),
        ));
    }
    let (file, meta) = match super::fsat::open_read(&canonical) {
        Ok(opened) => opened,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    read_bounded(path, file, &meta).map(Some)
}

/// Reads an opened file whose metadata is `meta`: a regular file of at most [`MAX_FILE`] bytes,
/// read no further than that even if it grows meanwhile.
fn read_bounded(path: &Path, file: std::fs::File, meta: &std::fs::Metadata) -> io::Result<String> {
    use std::io::Read as _;
    if meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            format!("{} is a directory", path.display()),
        ));
    }
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is not a regular file (a device, FIFO or socket); Keel does not read it",
                path.display()
            ),
        ));
    }
    let too_big = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is over {} KiB; Keel reads settings, skills, agents and tool files of at \
                 most that",
                path.display(),
                MAX_FILE / 1024
            ),
        )
    };
    if meta.len() > MAX_FILE {
        return Err(too_big());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_FILE + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(too_big());
    }
    String::from_utf8(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not UTF-8 text", path.display()),
        )
    })
}

/// The entries of a directory, sorted; empty when it does not exist.
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn list_dir(path: &Path) -> io::Result<Vec<std::path::PathBuf>> {
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut paths = Vec::new();
    for entry in entries {
        paths.push(entry?.path());
    }
    paths.sort();
    Ok(paths)
}

/// Replaces a file's content atomically (temp file + rename), creating missing parent
/// directories.
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn write_atomically(path: &Path, text: &str) -> io::Result<()> {
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent)?;
    }
    super::atomic_write(path, text.as_bytes())
}

/// Replaces a file only its owner may read (mode 600, whatever the file's mode was)
/// atomically: the temporary file is created with that mode, written, synced and renamed over
/// the file, so no reader ever sees a partial or world-readable key. Creates missing parent
/// directories.
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn write_private(path: &Path, text: &str) -> io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;

    use atomic_write_file::unix::OpenOptionsExt as _;
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = atomic_write_file::AtomicWriteFile::options()
        .mode(0o600)
        .preserve_mode(false)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    file.commit()
}

/// The `*.toml` files directly in `dir`, sorted by name (none when `dir` does not exist).
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn toml_files(dir: &Path) -> io::Result<Vec<std::path::PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry?.path();
        // Anything but a directory: a symlink or a device named `x.toml` is listed, and the
        // bounded read refuses it with a reason the user sees.
        if path.extension().is_some_and(|ext| ext == "toml") && !path.is_dir() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}
