//! Whether a path is a credential file: [`is_secret_path`] for one path, [`FilesIn`] for the
//! files of one directory at once (the search gate's per-file question, decided per directory).

use std::path::Path;

use super::{
    SECRET_DIRS, SECRET_FILES, at_or_below, below, config_text_holds_credential, fold,
    is_git_config_text, is_repository_dir, is_secret_name, is_user_git_config_text,
};

/// Whether `path` is a credential file, with `home` the user's home directory.
pub fn is_secret_path(home: Option<&Path>, path: &Path) -> bool {
    {
        // Folded once: the search gate asks this of every file a search finds.
        let lossy = path
            .to_str()
            .map_or_else(|| path.to_string_lossy(), std::borrow::Cow::Borrowed);
        let text = fold(&lossy);
        let text = text.as_ref();
        if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(is_secret_name)
            || (is_git_config_text(text) && config_text_holds_credential(path))
            || (is_user_git_config_text(text) && config_text_holds_credential(path))
        {
            return true;
        }
        if text.ends_with("/.ssh/known_hosts") || text.ends_with(".pub") {
            return false;
        }
        // The home directory's credential stores, wherever a copy of them lies: `~/.aws/x`,
        // and also `<workspace>/backup/.aws/x` or `<workspace>/.ssh/deploy` (a workspace's
        // own `.ssh`, `.gnupg`, `.docker/config.json`, ...). Every component may start one.
        if let Some(home) = home
            && let Some(relative) = below(text, home)
            && SECRET_DIRS
                .iter()
                .chain(SECRET_FILES)
                .any(|s| at_or_below(&relative, s))
        {
            return true;
        }
        // Elsewhere a credential directory counts for what is inside it (a directory named
        // `.ssh` is not itself read by `cd`). Every entry (and `.envs`) begins with a dot
        // (`secret_entries_begin_with_a_dot`), so only the rest of the path from a component
        // that begins with one can be one: those are looked at, in the path as it is when it
        // has no empty component (every path a search finds), else in the path without them.
        let joined;
        let text = if text.contains("//") || text.ends_with('/') {
            joined = text
                .split('/')
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>()
                .join("/");
            joined.as_str()
        } else {
            text
        };
        let mut starts = text
            .starts_with('.')
            .then_some(0)
            .into_iter()
            .chain(text.match_indices("/.").map(|(at, _)| at + 1));
        starts.any(|start| {
            let relative = &text[start..];
            // `.envs/.production/.postgres` (cookiecutter-django's layout): every file below.
            relative
                .strip_prefix(".envs/")
                .is_some_and(|rest| !rest.is_empty())
                || SECRET_DIRS.iter().any(|s| {
                    relative
                        .strip_prefix(s)
                        .is_some_and(|rest| rest.len() > 1 && rest.starts_with('/'))
                })
                || SECRET_FILES.iter().any(|s| at_or_below(relative, s))
        })
    }
}

/// What a read of a file in one directory asks the watchdog, decided once for the directory:
/// [`Watchdog::check_path`]'s credential check (reads: [`is_secret_path`] or a repository's
/// configuration), split into what holds for every file of the directory and what depends on
/// the file's name. For ASCII paths without empty, `.` or `..` components (what a search's
/// walk reaches); `FilesIn::of` refuses others.
#[derive(Debug, Clone, Default)]
pub(crate) struct FilesIn {
    /// Every file of the directory is inside a credential store (`~/.aws/`, `.ssh/`, `.envs/`).
    every: bool,
    /// Folded names that make a file of the directory a credential (`~/.docker/config.json` in
    /// `~/.docker`, `.netrc` anywhere).
    names: Vec<String>,
    /// The directory has a `.git` or `<name>.git` component (its `config` is a repository's
    /// configuration).
    in_git: bool,
    /// The directory ends with `/.config/git` (its `config` is the user's git configuration).
    user_git: bool,
    /// The directory ends with `/.ssh` (its `known_hosts` is not a credential).
    ssh: bool,
}

impl FilesIn {
    /// For the directory `dir` (its folded text: ASCII lower case, absolute, without empty, `.`
    /// or `..` components) with the home directory `home`. `None` for any other text.
    pub(crate) fn of(home: Option<&Path>, dir: &str) -> Option<Self> {
        let clean = dir.starts_with('/')
            && dir.len() > 1
            && dir.is_ascii()
            && !dir.bytes().any(|b| b.is_ascii_uppercase())
            && dir[1..]
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != "..");
        if !clean {
            return None;
        }
        let mut files = FilesIn {
            in_git: dir.split('/').any(is_repository_dir),
            user_git: dir.ends_with("/.config/git"),
            ssh: dir.ends_with("/.ssh"),
            ..FilesIn::default()
        };
        // The home directory's credential stores and files.
        if let Some(home) = home {
            let home = home.to_string_lossy();
            let home = fold(&home);
            let home = home.trim_end_matches('/');
            let from = if dir == home {
                Some("")
            } else {
                dir.strip_prefix(home)
                    .and_then(|rest| rest.strip_prefix('/'))
            };
            if let Some(from) = from {
                files.entries(from, true);
            }
        }
        // A copy anywhere, from each component that begins with a dot: a store counts for
        // what is inside it, a file for itself; and `.envs/` for every file below it.
        for (at, _) in dir.match_indices("/.") {
            let from = &dir[at + 1..];
            if from == ".envs"
                || from.starts_with(".envs/")
                || SECRET_DIRS.iter().any(|entry| at_or_below(from, entry))
            {
                files.every = true;
            }
            files.entries(from, false);
        }
        // A file whose own name is one (`.netrc`).
        files.entries("", false);
        Some(files)
    }

    /// The credential files (and with `dirs_too` the stores) seen from `from`, a part of the
    /// directory's path (`""`: from the file's own name): a file `n` of the directory is at or
    /// below an entry when `from` is (every file), or when the entry is `from`'s `n`.
    fn entries(&mut self, from: &str, dirs_too: bool) {
        let dirs: &[&str] = if dirs_too { SECRET_DIRS } else { &[] };
        for entry in SECRET_FILES.iter().chain(dirs) {
            if from.is_empty() {
                if !entry.contains('/') {
                    self.names.push((*entry).to_owned());
                }
            } else if at_or_below(from, entry) {
                self.every = true;
            } else if let Some(name) = entry
                .strip_prefix(from)
                .and_then(|rest| rest.strip_prefix('/'))
                .filter(|rest| !rest.is_empty() && !rest.contains('/'))
            {
                self.names.push(name.to_owned());
            }
        }
    }

    /// Whether reading the file `name` of the directory escalates as a credential read: what
    /// [`Watchdog::check_path`] says of a read of it. `folded` is the name in ASCII lower case,
    /// `path` the file's canonical path (a user git configuration is read to see whether it
    /// holds a credential, as [`is_secret_path`] does).
    pub(crate) fn holds_credentials(&self, folded: &str, path: &Path) -> bool {
        if crate::policy::commands::is_secret_lowered(folded) {
            return true;
        }
        if (folded == "config" || folded == "config.worktree") && self.in_git {
            return true;
        }
        if (folded == ".gitconfig" || (folded == "config" && self.user_git))
            && config_text_holds_credential(path)
        {
            return true;
        }
        if (folded == "known_hosts" && self.ssh) || folded.ends_with(".pub") {
            return false;
        }
        self.every || self.names.iter().any(|n| n == folded)
    }
}
