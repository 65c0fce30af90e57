//! Rules about the source itself, checked on the source: the bundled tool ids are spelled only
//! where the registry defines them, no JSON value reaches the policy, and keel-core's
//! top-level modules form no cycle beyond the allowed list (and docs/ARCHITECTURE.md shows the
//! graph this test computes). Comments and `#[cfg(test)]` items are left out: what is checked
//! is the code that ships.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use keel_core::tool::BundledTool;

/// A source file with its comments removed and its string literals set apart.
struct Scanned {
    /// The code: comments gone, every string or char literal emptied (`""`), newlines kept.
    code: String,
    /// Each string literal's text (escapes as written) and the line it starts on.
    literals: Vec<(usize, String)>,
}

/// Where the (nested) block comment at `chars[i]` ends; its line breaks are kept in `code`.
fn past_block_comment(chars: &[char], mut i: usize, line: &mut usize, code: &mut String) -> usize {
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let mut depth = 0;
    while i < chars.len() {
        if chars[i] == '/' && at(i + 1) == '*' {
            depth += 1;
            i += 2;
        } else if chars[i] == '*' && at(i + 1) == '/' {
            depth -= 1;
            i += 2;
            if depth == 0 {
                break;
            }
        } else {
            if chars[i] == '\n' {
                *line += 1;
                code.push('\n');
            }
            i += 1;
        }
    }
    i
}

/// Splits Rust source into code and string literals (a lexer just good enough for that:
/// comments, nested block comments, escapes, raw strings, char literals and lifetimes).
fn scan(source: &str) -> Scanned {
    let chars: Vec<char> = source.chars().collect();
    let mut code = String::with_capacity(source.len());
    let mut literals = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && at(i + 1) == '*' {
            i = past_block_comment(&chars, i, &mut line, &mut code);
            continue;
        }
        // A raw string: r"..", r#".."#, br#".."#.
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        let raw_start = if !ident_before && c == 'r' {
            Some(i + 1)
        } else if !ident_before && c == 'b' && at(i + 1) == 'r' {
            Some(i + 2)
        } else {
            None
        };
        if let Some(mut j) = raw_start {
            let mut hashes = 0;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            if at(j) == '"' {
                let start_line = line;
                let mut text = String::new();
                j += 1;
                loop {
                    if j >= chars.len() {
                        break;
                    }
                    if chars[j] == '"' && (0..hashes).all(|k| at(j + 1 + k) == '#') {
                        j += 1 + hashes;
                        break;
                    }
                    if chars[j] == '\n' {
                        line += 1;
                        code.push('\n');
                    }
                    text.push(chars[j]);
                    j += 1;
                }
                literals.push((start_line, text));
                code.push_str("\"\"");
                i = j;
                continue;
            }
        }
        if c == '"' {
            let start_line = line;
            let mut text = String::new();
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    text.push(chars[i]);
                    i += 1;
                }
                if chars[i] == '\n' {
                    line += 1;
                    code.push('\n');
                }
                text.push(chars[i]);
                i += 1;
            }
            i += 1;
            literals.push((start_line, text));
            code.push_str("\"\"");
            continue;
        }
        if c == '\'' {
            // A char literal ('x', '\n', '\u{7f}'), or a lifetime ('a), which stays code.
            if at(i + 1) == '\\' {
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                code.push_str("' '");
                i = j + 1;
                continue;
            }
            if at(i + 2) == '\'' {
                code.push_str("' '");
                i += 3;
                continue;
            }
        }
        if c == '\n' {
            line += 1;
        }
        code.push(c);
        i += 1;
    }
    Scanned { code, literals }
}

/// The line ranges of `#[cfg(test)]` items (a `mod tests { .. }`, `mod tests;`, a function).
fn test_lines(code: &str) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    let mut search = 0;
    while let Some(found) = code[search..].find("#[cfg(test)]") {
        let start = search + found;
        let rest = &code[start..];
        let end = match (rest.find('{'), rest.find(';')) {
            (Some(open), semi) if semi.is_none_or(|semi| open < semi) => {
                let mut depth = 0;
                let mut end = rest.len();
                for (k, c) in rest[open..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = open + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                start + end
            }
            (_, Some(semi)) => start + semi + 1,
            _ => code.len(),
        };
        let line = |offset: usize| code[..offset].matches('\n').count() + 1;
        ranges.push((line(start), line(end)));
        search = end;
    }
    ranges
}

fn shipped(scanned: &Scanned) -> (String, Vec<(usize, String)>) {
    let tests = test_lines(&scanned.code);
    let in_tests = |line: usize| tests.iter().any(|(a, b)| (*a..=*b).contains(&line));
    let code = scanned
        .code
        .lines()
        .enumerate()
        .map(|(k, text)| if in_tests(k + 1) { "" } else { text })
        .collect::<Vec<_>>()
        .join("\n");
    let literals = scanned
        .literals
        .iter()
        .filter(|(line, _)| !in_tests(*line))
        .cloned()
        .collect();
    (code, literals)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A shipped `.rs` file: its `crate/src/...` path, its code and its string literals.
struct Source {
    file: String,
    code: String,
    literals: Vec<(usize, String)>,
}

/// Every shipped `.rs` file of keel-core and keel-acp.
fn shipped_sources() -> Vec<Source> {
    let crates = crates_dir();
    let mut files = Vec::new();
    rust_files(&crates.join("core/src"), &mut files);
    rust_files(&crates.join("acp/src"), &mut files);
    files
        .into_iter()
        .map(|path| {
            let name = path.strip_prefix(&crates).unwrap().display().to_string();
            let (code, literals) = shipped(&scan(&std::fs::read_to_string(&path).unwrap()));
            Source {
                file: name,
                code,
                literals,
            }
        })
        .collect()
}

/// Literals spelled like a bundled tool id that name something else, each with why.
const NOT_TOOL_IDS: &[(&str, &str, &str)] = &[
    ("core/src/policy/commands.rs", "grep", "the program"),
    ("core/src/policy/commands.rs", "bash", "the program"),
    (
        "core/src/policy/read_only.rs",
        "grep",
        "the program, and git's subcommand",
    ),
    ("core/src/policy/read_only.rs", "glob", "ripgrep's option"),
    ("core/src/policy/wrappers.rs", "bash", "the shell program"),
    (
        "core/src/policy/shell/parse.rs",
        "bash",
        "the shell program",
    ),
    (
        "core/src/policy/shell/render.rs",
        "bash",
        "the shell program",
    ),
    (
        "core/src/policy/shell/render.rs",
        "read",
        "the shell builtin",
    ),
    (
        "core/src/runtime/process.rs",
        "bash",
        "the shell program (`SHELL`)",
    ),
    (
        "core/src/runtime/mod.rs",
        "read",
        "the verb of a file access",
    ),
    (
        "core/src/runtime/handed_over.rs",
        "read",
        "the verb of a file access",
    ),
    (
        "core/src/config/project_trust.rs",
        "read",
        "a `[sandbox]` key",
    ),
    ("core/src/contract.rs", "read", "`ToolKind::Read`'s name"),
    ("core/src/contract.rs", "edit", "`ToolKind::Edit`'s name"),
    (
        "core/src/mcp/tool.rs",
        "grep",
        "a word of an MCP tool's name",
    ),
    ("acp/src/server/fs.rs", "read", "a field's name in `Debug`"),
    ("acp/src/server/fs.rs", "write", "a field's name in `Debug`"),
];

/// Files where any bundled tool id may be spelled: the registry, which defines them, and the
/// table of other agents' names for our tools, which maps onto them. A tool's own module may
/// spell its own id (it names it through `ID` where it means the tool).
const ID_FILES: &[&str] = &["core/src/tool/registry.rs", "core/src/tools/aliases.rs"];

/// The sandbox's sources (moving to a crate of their own) spell the shell program `bash`.
const SANDBOX_DIR: &str = "core/src/runtime/sandbox/";

/// Argument names only the bundled tools' own modules read.
const ARGUMENT_NAMES: &[&str] = &[
    "file_path",
    "unsandboxed",
    "old_string",
    "new_string",
    "replace_all",
    "subagent_type",
    "timeout_seconds",
    "max_results",
    "output_mode",
    "head_limit",
];

/// Argument names spelled outside their tools, each with why.
const NOT_CALL_ARGUMENTS: &[(&str, &str, &str)] = &[(
    "core/src/agent/compact.rs",
    "file_path",
    "a summary lists the paths any recorded call (an MCP one too) named",
)];

#[test]
fn tool_ids_and_argument_names_are_spelled_only_by_their_owners() {
    let ids: Vec<&str> = BundledTool::ALL.iter().map(|tool| tool.id()).collect();
    let mut found = Vec::new();
    for Source { file, literals, .. } in shipped_sources() {
        for (line, text) in literals {
            let text = text.as_str();
            let own_module = file == format!("core/src/tools/{text}.rs")
                || (file == "core/src/tools/background.rs" && text.starts_with("bg_"));
            let elsewhere = ID_FILES.contains(&file.as_str())
                || (file.starts_with(SANDBOX_DIR) && text == "bash")
                || NOT_TOOL_IDS
                    .iter()
                    .any(|(f, literal, _)| *f == file && *literal == text);
            if ids.contains(&text) && !own_module && !elsewhere {
                found.push(format!("{file}:{line}: tool id \"{text}\""));
            }
            if ARGUMENT_NAMES.contains(&text)
                && !file.starts_with("core/src/tools/")
                && !NOT_CALL_ARGUMENTS
                    .iter()
                    .any(|(f, literal, _)| *f == file && *literal == text)
            {
                found.push(format!("{file}:{line}: argument name \"{text}\""));
            }
        }
    }
    assert!(
        found.is_empty(),
        "name a bundled tool through `BundledTool` or its module's `ID`, and read arguments \
         only in the tool (its `Tool::target`):\n{}",
        found.join("\n")
    );
}

#[test]
fn no_json_value_reaches_the_policy() {
    let mut found = Vec::new();
    for Source { file, code, .. } in shipped_sources() {
        if file.starts_with("core/src/policy/") && code.contains("serde_json") {
            for (k, line) in code.lines().enumerate() {
                if line.contains("serde_json") {
                    found.push(format!("{file}:{}: {}", k + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "the policy decides on `CallTarget`, never on JSON:\n{}",
        found.join("\n")
    );
}

/// Cycles among keel-core's top-level modules that are known and not yet broken, each sorted:
/// none.
const ALLOWED_CYCLES: &[&[&str]] = &[];

/// The top-level modules `crate::` and `super::` paths of one file name (its own left out).
fn modules_named(code: &str, depth: usize, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let bytes = code.as_bytes();
    let ident_char = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut found = BTreeSet::new();
    // What follows a path prefix that reaches the crate root: `name` or `{a::b, c}`.
    let mut take = |rest: &str| {
        let rest = rest.trim_start();
        let heads: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut end = group.len();
            for (k, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        end = k;
                        break;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            group[..end].split(',').map(str::trim).collect()
        } else {
            vec![rest]
        };
        for head in heads {
            let name: String = head
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if modules.contains(&name) {
                found.insert(name);
            }
        }
    };
    let mut i = 0;
    while i < code.len() {
        let boundary = i == 0 || !(ident_char(bytes[i - 1]) || bytes[i - 1] == b'$');
        if boundary && code[i..].starts_with("crate::") {
            take(&code[i + "crate::".len()..]);
            i += "crate::".len();
        } else if boundary && code[i..].starts_with("super::") {
            let mut j = i;
            let mut ups = 0;
            while code[j..].starts_with("super::") {
                ups += 1;
                j += "super::".len();
            }
            if ups >= depth {
                take(&code[j..]);
            }
            i = j;
        } else {
            i += 1;
        }
    }
    found
}

/// keel-core's top-level modules and the modules each one's shipped code names.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = crates_dir().join("core/src");
    let lib = scan(&std::fs::read_to_string(src.join("lib.rs")).unwrap()).code;
    let modules: BTreeSet<String> = lib
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let line = line.strip_prefix("pub ").unwrap_or(line);
            line.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(str::to_owned)
        })
        .collect();
    let mut graph = BTreeMap::new();
    for module in &modules {
        let mut files = Vec::new();
        let file = src.join(format!("{module}.rs"));
        if file.exists() {
            files.push(file);
        }
        if src.join(module).is_dir() {
            rust_files(&src.join(module), &mut files);
        }
        let mut uses = BTreeSet::new();
        for file in files {
            let relative = file.strip_prefix(&src).unwrap();
            let parts = relative.components().count();
            // `x.rs` and `x/mod.rs` are the module itself; `x/a.rs` is one level below it.
            let depth = if relative.file_name().is_some_and(|n| n == "mod.rs") {
                parts - 1
            } else {
                parts
            };
            let (code, _) = shipped(&scan(&std::fs::read_to_string(&file).unwrap()));
            uses.extend(modules_named(&code, depth, &modules));
        }
        uses.remove(module);
        graph.insert(module.clone(), uses);
    }
    graph
}

/// Every module each module reaches, itself included only through a cycle.
fn reach(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, BTreeSet<String>> {
    graph
        .keys()
        .map(|start| {
            let mut seen = BTreeSet::new();
            let mut todo: Vec<&String> = graph[start].iter().collect();
            while let Some(next) = todo.pop() {
                if seen.insert(next.clone()) {
                    todo.extend(graph[next].iter());
                }
            }
            (start.clone(), seen)
        })
        .collect()
}

/// The graph as docs/ARCHITECTURE.md shows it: the modules that reach the most first.
fn graph_table(graph: &BTreeMap<String, BTreeSet<String>>) -> String {
    let reach = reach(graph);
    let mut rows: Vec<&String> = graph.keys().filter(|m| !graph[*m].is_empty()).collect();
    rows.sort_by_key(|m| (std::cmp::Reverse(reach[*m].len()), (*m).clone()));
    let mut table = vec!["| module | uses |".to_owned(), "| --- | --- |".to_owned()];
    for module in rows {
        let uses: Vec<&str> = graph[module].iter().map(String::as_str).collect();
        table.push(format!("| `{module}` | {} |", uses.join(", ")));
    }
    let leaves: Vec<String> = graph
        .keys()
        .filter(|m| graph[*m].is_empty())
        .map(|m| format!("`{m}`"))
        .collect();
    if !leaves.is_empty() {
        table.push(format!("| {} | — |", leaves.join(", ")));
    }
    table.join("\n")
}

#[test]
fn the_contract_is_a_leaf_and_the_runtime_needs_only_it_and_the_capabilities() {
    let graph = module_graph();
    assert_eq!(graph["contract"], BTreeSet::new());
    let expected: BTreeSet<String> = ["capability", "contract"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(graph["runtime"], expected);
}

#[test]
fn keel_cores_modules_form_no_new_cycle_and_the_architecture_shows_their_graph() {
    let graph = module_graph();
    let reach = reach(&graph);
    let mut cycles: BTreeSet<Vec<String>> = BTreeSet::new();
    for module in graph.keys() {
        if reach[module].contains(module) {
            let cycle: Vec<String> = graph
                .keys()
                .filter(|other| reach[module].contains(*other) && reach[*other].contains(module))
                .cloned()
                .collect();
            cycles.insert(cycle);
        }
    }
    let allowed: BTreeSet<Vec<String>> = ALLOWED_CYCLES
        .iter()
        .map(|cycle| cycle.iter().map(|m| (*m).to_owned()).collect())
        .collect();
    let table = graph_table(&graph);
    assert_eq!(
        cycles, allowed,
        "keel-core's module cycles changed; the graph:\n{table}"
    );
    let architecture =
        std::fs::read_to_string(crates_dir().join("../docs/ARCHITECTURE.md")).unwrap();
    let shown: Vec<&str> = architecture
        .split("## The module graph")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .skip_while(|line| !line.starts_with("| module | uses |"))
        .take_while(|line| line.starts_with('|'))
        .collect();
    assert_eq!(
        shown.join("\n"),
        table,
        "docs/ARCHITECTURE.md's module graph is not the one the source has"
    );
}
