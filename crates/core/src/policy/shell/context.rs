//! Where things are: [`ShellContext`] (the workspace roots, the home directory, the runtime for
//! symlinks) and [`Place`], where a command's path argument points.

use std::path::{Component, Path, PathBuf};

use super::Cwd;
use crate::runtime::Runtime;

/// What the analysis needs to know about the world.
#[derive(Debug, Clone, Copy)]
pub struct ShellContext<'a> {
    /// Workspace roots (canonical); the first is where commands start.
    pub roots: &'a [PathBuf],
    pub home: Option<&'a Path>,
    /// Resolves symlinks when present.
    pub runtime: Option<&'a Runtime>,
    /// The session's scratch directory, which counts as inside.
    pub scratch: Option<&'a Path>,
}

/// Where a path argument points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// Strictly inside a workspace root (or the scratch directory).
    Inside(PathBuf),
    /// A workspace root itself.
    Root(PathBuf),
    Outside(PathBuf),
    /// Holds an expansion, or the working directory is unknown.
    Unknown,
}

impl Place {
    pub fn path(&self) -> Option<&Path> {
        match self {
            Place::Inside(p) | Place::Root(p) | Place::Outside(p) => Some(p),
            Place::Unknown => None,
        }
    }
}

impl ShellContext<'_> {
    /// Where `word` points when a command running in `cwd` uses it as a path. `~` and
    /// `$HOME` expand to the home directory; a glob stands for its directory.
    pub fn place(&self, word: &str, cwd: &Cwd) -> Place {
        let word = word.trim_matches(|c| c == '"' || c == '\'');
        let expanded = if let Some(rest) = strip_home(word) {
            match self.home {
                Some(home) => home.join(rest.trim_start_matches('/')),
                None => return Place::Unknown,
            }
        } else if word.starts_with('~') {
            // `~user`: somebody's home, never the workspace.
            PathBuf::from("/home").join(word.trim_start_matches('~'))
        } else if word.contains(['$', '`']) {
            return Place::Unknown;
        } else {
            let literal = match word.find(['*', '?', '[']) {
                Some(at) => match word[..at].rfind('/') {
                    Some(0) => "/",
                    Some(slash) => &word[..slash],
                    None => ".",
                },
                None => word,
            };
            if Path::new(literal).is_absolute() {
                PathBuf::from(literal)
            } else {
                match cwd {
                    Cwd::Known(dir) => dir.join(literal),
                    Cwd::Unknown => return Place::Unknown,
                }
            }
        };
        // Symlinks are resolved component by component *before* `..` is applied to them
        // (`src/up/..` where `src/up -> ..` climbs out); a path that cannot be resolved is
        // not placed.
        let path = match self.runtime {
            Some(runtime) => match expanded.to_str().map(|text| runtime.resolve(text)) {
                Some(Ok(resolved)) => resolved,
                _ => return Place::Unknown,
            },
            None => normalize(&expanded),
        };
        self.classify(path)
    }

    /// Places an absolute, resolved path.
    pub fn classify(&self, path: PathBuf) -> Place {
        if self.roots.contains(&path) {
            return Place::Root(path);
        }
        let inside = self.roots.iter().any(|r| path.starts_with(r))
            || self.scratch.is_some_and(|s| path.starts_with(s));
        if inside {
            Place::Inside(path)
        } else {
            Place::Outside(path)
        }
    }

    /// Where a command line starts: the primary root.
    pub fn start(&self) -> Cwd {
        self.roots
            .first()
            .map(|r| Cwd::Known(r.clone()))
            .unwrap_or(Cwd::Unknown)
    }
}

fn strip_home(word: &str) -> Option<&str> {
    if word == "~" || word == "$HOME" || word == "${HOME}" {
        return Some("");
    }
    word.strip_prefix("~/")
        .or_else(|| word.strip_prefix("$HOME/"))
        .or_else(|| word.strip_prefix("${HOME}/"))
}

/// `..` and `.` applied lexically.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(part) => out.push(part),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// Characters that hide what a text says: zero-width and bidirectional controls, and
/// look-alikes of `/` and `.`. The engine refuses paths and commands that contain them.
pub fn confusable_char(text: &str) -> Option<char> {
    if text.is_ascii() {
        // Every listed character lies outside ASCII: only the control characters remain (the
        // search gate asks this of every path a search finds). Looked for over all the bytes
        // at once first, then found.
        let controls = text.bytes().fold(false, |seen, b| {
            seen | (b.is_ascii_control() & !matches!(b, b'\n' | b'\t' | b'\r'))
        });
        if !controls {
            return None;
        }
        return text
            .bytes()
            .find(|b| b.is_ascii_control() && !matches!(*b, b'\n' | b'\t' | b'\r'))
            .map(char::from);
    }
    text.chars().find(|c| {
        matches!(
            *c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{2069}'
                | '\u{3164}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{2044}'
                | '\u{2215}'
                | '\u{2571}'
                | '\u{29F8}'
                | '\u{FF0F}'
                | '\u{FF3C}'
                | '\u{FF0E}'
                | '\u{2024}'
                | '\u{FE52}'
                | '\u{FE68}'
                | '\u{3002}'
        ) || (c.is_control() && !matches!(*c, '\n' | '\t' | '\r'))
    })
}

/// Whether a redirection target, exactly as written, is a device that holds no file: only the
/// exact names count (`/dev/fd/3/../x` or `/dev/./null` are paths like any other, resolved and
/// placed).
pub fn is_harmless_device(target: &str) -> bool {
    matches!(
        target,
        "/dev/null"
            | "/dev/stdout"
            | "/dev/stderr"
            | "/dev/stdin"
            | "/dev/tty"
            | "/dev/fd/0"
            | "/dev/fd/1"
            | "/dev/fd/2"
    )
}
