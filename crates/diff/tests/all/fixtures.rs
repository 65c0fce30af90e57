//! Snapshot tests driven by `fixtures/diff/NNN_name/`.
//!
//! Each case directory holds `before` and `after` (no `before`: a new file; no `after`: a
//! deletion) and optionally `meta`, lines of `key: value`: `path` (default `file.txt`) and
//! `rename-from`. Each case snapshots the unified text with the summary line, and the plain
//! terminal rendering at a fixed width.

use std::io;
use std::path::{Path, PathBuf};

use keel_diff::{FileDiff, TerminalStyle};

const TERMINAL: TerminalStyle = TerminalStyle {
    color: false,
    width: 72,
    tab_width: 4,
};

struct Case {
    name: String,
    path: String,
    rename_from: Option<String>,
    before: Option<Vec<u8>>,
    after: Option<Vec<u8>>,
}

#[expect(
    clippy::disallowed_methods,
    reason = "fixtures are repository files read by the test itself, not agent file access"
)]
fn read_if_present(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

fn load_case(dir: &Path) -> io::Result<Case> {
    let meta = read_if_present(&dir.join("meta"))?.unwrap_or_default();
    let meta = String::from_utf8_lossy(&meta);
    let field = |key: &str| {
        meta.lines()
            .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
            .map(|value| value.trim().to_owned())
    };
    Ok(Case {
        name: dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default(),
        path: field("path").unwrap_or_else(|| "file.txt".to_owned()),
        rename_from: field("rename-from"),
        before: read_if_present(&dir.join("before"))?,
        after: read_if_present(&dir.join("after"))?,
    })
}

#[expect(
    clippy::disallowed_methods,
    reason = "fixtures are repository files listed by the test itself, not agent file access"
)]
fn load_cases() -> io::Result<Vec<Case>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/diff");
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(root)? {
        let path = entry?.path();
        if path.is_dir() {
            dirs.push(path);
        }
    }
    dirs.sort();
    dirs.iter().map(|dir| load_case(dir)).collect()
}

#[test]
fn fixtures() {
    let cases = load_cases().unwrap();
    assert!(
        cases.len() >= 15,
        "found only {} fixture cases",
        cases.len()
    );
    for case in cases {
        let computed = FileDiff::compute(&case.path, case.before.as_deref(), case.after.as_deref());
        let diff = match (computed, &case.rename_from) {
            (Ok(diff), Some(from)) => diff.renamed(from),
            (Ok(diff), None) => diff,
            (Err(err), _) => {
                insta::assert_snapshot!(format!("{}__error", case.name), err.to_string());
                continue;
            }
        };
        insta::assert_snapshot!(
            format!("{}__unified", case.name),
            format!("{}{}\n", diff.unified(), diff.summary())
        );
        let terminal = diff.render_terminal(&TERMINAL);
        assert!(
            !terminal.contains('\x1b'),
            "{}: escape codes in plain output",
            case.name
        );
        insta::assert_snapshot!(format!("{}__terminal", case.name), terminal);
    }
}
