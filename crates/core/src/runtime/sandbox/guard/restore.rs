//! Putting a guarded entry back as it was, reached without following any symlink.

#![expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]

use std::ffi::OsStr;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{Mode, fchmod, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, symlinkat, unlinkat};

use super::{Before, Stamp, read_no_follow};
use crate::runtime::fsat;

pub(super) enum Outcome {
    Same,
    PutBack,
    TooLarge,
}

/// Puts `path` back to `before` when it changed.
pub(super) fn put_back(path: &Path, before: &Before) -> std::io::Result<Outcome> {
    let now = std::fs::symlink_metadata(path);
    match (before, &now) {
        (Before::Dir { .. }, Ok(meta)) if meta.is_dir() => return Ok(Outcome::Same),
        (Before::File { stamp, .. }, Ok(meta)) if meta.is_file() && Stamp::of(meta) == *stamp => {
            return Ok(Outcome::Same);
        }
        (
            Before::File {
                bytes: Some(bytes),
                stamp,
            },
            Ok(meta),
        ) if meta.is_file()
            && meta.mode() == stamp.mode
            && read_no_follow(path).is_some_and(|now| now == **bytes) =>
        {
            // Touched, or rewritten with the same bytes: nothing to put back.
            return Ok(Outcome::Same);
        }
        (Before::Symlink { target, .. }, Ok(meta))
            if meta.file_type().is_symlink()
                && std::fs::read_link(path).is_ok_and(|now| now == *target) =>
        {
            return Ok(Outcome::Same);
        }
        (Before::Other { stamp }, Ok(meta)) if Stamp::of(meta) == *stamp => {
            return Ok(Outcome::Same);
        }
        _ => {}
    }
    let (parent, name) = split(path)?;
    let dir = fsat::open_dir_creating(parent, &|_| Ok(()))?;
    match &now {
        Ok(meta) if meta.is_dir() => remove_tree_at(&dir, name)?,
        Ok(_) => unlinkat(&dir, name, UnlinkatFlags::NoRemoveDir)?,
        Err(_) => {}
    }
    match before {
        Before::File { bytes: None, .. } | Before::Other { .. } => Ok(Outcome::TooLarge),
        Before::File {
            bytes: Some(bytes),
            stamp,
        } => {
            fsat::replace_in(&dir, name, bytes)?;
            let file = openat(
                &dir,
                name,
                OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            )?;
            fchmod(file.as_fd(), Mode::from_bits_truncate(stamp.mode & 0o7777))?;
            Ok(Outcome::PutBack)
        }
        Before::Dir { mode } => {
            mkdirat(&dir, name, Mode::from_bits_truncate(mode & 0o7777))?;
            Ok(Outcome::PutBack)
        }
        Before::Symlink { target, .. } => {
            symlinkat(target.as_path(), &dir, name)?;
            Ok(Outcome::PutBack)
        }
    }
}

fn split(path: &Path) -> std::io::Result<(&Path, &OsStr)> {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => Ok((parent, name)),
        _ => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a path below a directory",
        )),
    }
}

/// Removes the entry at `path` (a whole directory tree), reached without following a symlink.
pub(super) fn remove_entry(path: &Path) -> std::io::Result<()> {
    let (parent, name) = split(path)?;
    let dir = fsat::open(parent, OFlag::O_RDONLY | OFlag::O_DIRECTORY)?;
    remove_tree_at(&dir, name)
}

/// Removes `name` inside `dir`: a file or symlink is unlinked, a directory emptied first
/// (every level opened with `O_NOFOLLOW`, so nothing outside is reached).
fn remove_tree_at(dir: &OwnedFd, name: &OsStr) -> std::io::Result<()> {
    remove_tree_depth(dir, name, 0)
}

fn remove_tree_depth(dir: &OwnedFd, name: &OsStr, depth: usize) -> std::io::Result<()> {
    let stat = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)?;
    if stat.st_mode & libc::S_IFMT != libc::S_IFDIR {
        unlinkat(dir, name, UnlinkatFlags::NoRemoveDir)?;
        return Ok(());
    }
    if depth > 256 {
        return Err(std::io::Error::other("a directory tree too deep to remove"));
    }
    let sub = openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let names: Vec<std::ffi::OsString> = {
        let listing = nix::dir::Dir::from_fd(sub.try_clone()?)?;
        let mut listing = listing;
        listing
            .iter()
            .flatten()
            .map(|entry| {
                use std::os::unix::ffi::OsStrExt as _;
                OsStr::from_bytes(entry.file_name().to_bytes()).to_os_string()
            })
            .filter(|entry| entry != "." && entry != "..")
            .collect()
    };
    for entry in names {
        remove_tree_depth(&sub, &entry, depth + 1)?;
    }
    unlinkat(dir, name, UnlinkatFlags::RemoveDir)?;
    Ok(())
}
