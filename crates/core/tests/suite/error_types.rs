//! The error types of the sources: a `Result` whose error is a bare `String` is allowed only
//! where the string is the product (a message shown as is, to the model or the user), and then
//! it says so in a `// String error: why` comment on the line or just above the item. Every
//! other failure is a typed error that keeps its source (docs/engine.md, "Errors").

use std::path::{Path, PathBuf};

/// What marks a `String` error as the product.
const MARKER: &str = "String error:";

/// How many lines above a signature the marker may stand (a doc comment, attributes and a
/// multi-line parameter list lie between the marker and the `-> Result<...>` line).
const REACH: usize = 12;

/// Sources whose error types are still to be typed, with the reason each is left out here
/// (none now: the scan covers every source).
const NOT_YET: &[(&str, &str)] = &[];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// Whether `line` names a `Result` whose error (its last type argument) is `String`, on one
/// line, as rustfmt writes short signatures and fields.
fn string_error(line: &str) -> bool {
    let mut rest = line;
    while let Some(start) = rest.find("Result<") {
        rest = &rest[start + "Result<".len()..];
        let mut depth = 0usize;
        let mut last = 0;
        for (at, c) in rest.char_indices() {
            match c {
                '<' | '(' | '[' => depth += 1,
                ',' if depth == 0 => last = at + 1,
                '>' | ')' | ']' if depth == 0 => {
                    if last > 0 && rest[last..at].trim() == "String" {
                        return true;
                    }
                    break;
                }
                '>' | ')' | ']' => depth -= 1,
                _ => {}
            }
        }
    }
    false
}

#[test]
fn every_string_error_is_a_message_shown_as_is_and_says_so() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for krate in std::fs::read_dir(workspace.join("crates")).unwrap() {
        let src = krate.unwrap().path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    files.sort();
    assert!(
        files.len() > 100,
        "the scan found only {} files",
        files.len()
    );
    let mut unmarked = Vec::new();
    let mut marked = 0;
    for file in &files {
        let relative = file
            .strip_prefix(&workspace)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if NOT_YET
            .iter()
            .any(|(prefix, _)| relative.starts_with(prefix))
        {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (index, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if !string_error(code) {
                continue;
            }
            let from = index.saturating_sub(REACH);
            if lines[from..=index].iter().any(|line| line.contains(MARKER)) {
                marked += 1;
            } else {
                unmarked.push(format!("{relative}:{}: {}", index + 1, line.trim()));
            }
        }
    }
    assert!(
        unmarked.is_empty(),
        "a `Result<_, String>` without a `// {MARKER} why` comment: type the error (thiserror, \
         its source kept), or say why the string is the product:\n{}",
        unmarked.join("\n")
    );
    // The scan sees the marked ones (it would pass vacuously if it read nothing).
    assert!(marked > 10, "only {marked} marked `String` errors found");
}

#[test]
fn the_scan_recognises_string_errors() {
    assert!(string_error("fn f() -> Result<(), String> {"));
    assert!(string_error(
        "    resolved: Result<(Arc<dyn Provider>, String), String>,"
    ));
    assert!(string_error(
        "BoxFuture<'a, Option<Result<String, String>>>"
    ));
    assert!(!string_error("fn f() -> Result<String, ToolError> {"));
    assert!(!string_error(
        "fn f() -> Result<Vec<String>, Box<ProviderError>> {"
    ));
    assert!(!string_error(
        "fn f() -> Result<BTreeMap<String, String>, CredentialsError> {"
    ));
}
