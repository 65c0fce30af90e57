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

/// The text of a file, or `None` when it does not exist.
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn read_if_exists(path: &Path) -> io::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
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
        if path.extension().is_some_and(|ext| ext == "toml") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}
