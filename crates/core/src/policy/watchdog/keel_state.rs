//! Opaque code that names Keel's own state.
//!
//! Write targets the shell parser extracts (redirections, `tee`, `cp`, `mv`, ...) go through
//! [`super::Watchdog::protected_path`]. Inline interpreter code and lines that are not plain
//! have no extracted targets: whatever they name is only text. Such text that names a place
//! of Keel's own state (the workspace's `.keel/`, `~/.config/keel`, `~/.local/share/keel`, the
//! global config directory, the trust store, in any spelling of the home directory) is refused:
//! Keel cannot tell whether the code writes there, so it assumes it does. (Code that assembles
//! the path at run time is beyond any text check; the process sandbox is the answer to that.)

use std::path::PathBuf;

use super::{Finding, WatchdogCategory};

/// Spellings of the home directory in code (`~`, `$HOME`, `${HOME}`, `os.homedir()` joins are
/// covered by the bare relative names below).
const HOME_RELATIVE: &[&str] = &[".config/keel", ".local/share/keel"];

/// Whether `text` names a place of Keel's own state. `protected` holds the absolute
/// directories (global config directory, user data directory); `roots` the workspaces.
pub(super) fn names_keel_state(
    text: &str,
    roots: &[PathBuf],
    protected: &[PathBuf],
) -> Option<Finding> {
    let lowered = text.to_lowercase();
    let mut hit: Option<String> = None;
    for dir in protected.iter().chain(
        roots
            .iter()
            .map(|r| r.join(".keel"))
            .collect::<Vec<_>>()
            .iter(),
    ) {
        let dir = dir.to_string_lossy().to_lowercase();
        if !dir.is_empty() && lowered.contains(dir.trim_end_matches('/')) {
            hit = Some(dir);
            break;
        }
    }
    if hit.is_none() {
        hit = HOME_RELATIVE
            .iter()
            .find(|name| lowered.contains(*name))
            .map(|name| (*name).to_owned());
    }
    if hit.is_none() && names_project_dir(&lowered) {
        hit = Some(".keel".to_owned());
    }
    hit.map(|place| Finding {
        category: WatchdogCategory::KeelConfig,
        reason: format!(
            "code Keel cannot analyse names {place}, Keel's own state; only the user changes it"
        ),
    })
}

/// `.keel` as a whole path component (`.keel/x`, `'.keel'`, `./.keel`), not `.keeling`.
fn names_project_dir(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(at) = text[from..].find(".keel") {
        let start = from + at;
        let end = start + ".keel".len();
        let before_ok = start == 0
            || !matches!(bytes[start - 1], b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.');
        let after_ok = end == bytes.len()
            || !matches!(bytes[end], b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.');
        if before_ok && after_ok {
            return true;
        }
        from = end;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_naming_keel_state_is_caught_in_any_spelling() {
        let roots = [PathBuf::from("/w")];
        let protected = [PathBuf::from("/data/keel")];
        for code in [
            "python3 -c \"open('/home/u/.local/share/keel/trusted.toml','w').write('x')\"",
            "perl -e 'open(F,\">$ENV{HOME}/.config/keel/config.toml\")'",
            "node -e \"require('fs').writeFileSync('.keel/config.toml','')\"",
            "python3 -c \"open('/DATA/keel/trusted.toml','w')\"",
            "ruby -e \"File.write('/w/.keel/permissions.toml', '')\"",
        ] {
            assert!(
                names_keel_state(code, &roots, &protected).is_some(),
                "{code}"
            );
        }
        for code in [
            "python3 -c \"print(1)\"",
            "node -e \"require('./.keeling')\"",
            "python3 -c \"open('src/keel.rs')\"",
        ] {
            assert!(
                names_keel_state(code, &roots, &protected).is_none(),
                "{code}"
            );
        }
    }
}
