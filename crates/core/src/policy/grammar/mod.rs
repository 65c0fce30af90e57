//! Allowlisted command grammars: what a command may be given and still only read.
//!
//! The bundled table (`grammars.toml`, docs/permissions.md documents its format) declares, per
//! command and per subcommand (`git log`), every option the command may be given without a
//! prompt: short flags (combinable, `-la`), short options with a value (attached `-n5` or
//! separate `-n 5`), long flags, long options with a required value (`--lines=5`,
//! `--lines 5`) or an optional one (`--color=auto` only), and which values and operands are
//! paths. [`fit`] matches one peeled argv against the table:
//!
//! - [`Fit::Ungoverned`]: no grammar speaks for this command (`cargo test`): it is not
//!   read-only, and keeps its ordinary approval key.
//! - [`Fit::Accepted`]: every word is in the grammar; the caller checks the returned path
//!   words (inside the workspace after resolution, not credentials).
//! - [`Fit::Rejected`]: a grammar governs the command and a word is outside it (an unknown or
//!   ambiguous option, an option that names a program or an output file, an operand where
//!   none is allowed). The call is not read-only and gets no approval key: it asks each time.
//!
//! GNU long-option abbreviations (`--out` for `--output`) are resolved against the tool's full
//! option list (allowed and `known` options) before matching, the way `getopt_long` does; a
//! grammar without a complete list (`abbrev = false`) accepts only options spelled in full.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

use super::pattern::base_name;
use crate::tool::view::code;

/// The bundled grammars.
pub const BUNDLED_GRAMMARS: &str = include_str!("grammars.toml");

/// Longest argv a grammar looks at; longer ones are rejected unread.
pub const MAX_WORDS: usize = 4096;

/// Longest single word a grammar looks at.
pub const MAX_WORD_BYTES: usize = 64 * 1024;

/// What the table says about one argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fit {
    /// No grammar governs the command.
    Ungoverned,
    /// Inside the grammar of `name`; `paths` are the words used as paths.
    Accepted { name: String, paths: Vec<String> },
    /// A grammar governs the command, and the argv is outside it.
    Rejected { name: String, reason: String },
}

impl Fit {
    pub fn accepted(&self) -> bool {
        matches!(self, Fit::Accepted { .. })
    }

    pub fn rejected(&self) -> bool {
        matches!(self, Fit::Rejected { .. })
    }
}

/// What a value or an operand is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// Free text (a pattern, a number, a format).
    Text,
    /// A path the command reads: checked like any path.
    Path,
    /// Two free-text words (`jq --arg name value`).
    Pair,
}

/// How an option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    Flag,
    /// `-n 5`, `-n5`, `--lines=5`, `--lines 5`.
    Required(Value),
    /// `--color=auto` or `--color`; `-u` or `-uno` (attached only).
    Optional(Value),
}

/// How operands are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operands {
    None,
    Text,
    Path,
    /// The first operand is a pattern unless a `pattern_from` option gave one; the rest are
    /// paths (grep).
    PatternPath,
    /// The first operand is a jq filter (checked by [`jq_filter_problem`]); the rest paths.
    Jq,
}

/// How the words are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// getopt_long: options anywhere until `--`.
    Gnu,
    /// find: start points, then an expression of whole-word primaries.
    Find,
}

/// Which calls of its command a grammar speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Governs {
    Always,
    /// Not a call whose first word is not an option (`cargo test` is another subcommand).
    Subcommands,
    /// Only calls made of options alone (`python3 --version`, not `python3 x.py`).
    FlagsOnly,
}

/// One compiled grammar.
#[derive(Debug, Clone)]
pub struct Grammar {
    pub name: String,
    pub summary: String,
    short: BTreeMap<char, Arity>,
    long: BTreeMap<String, Arity>,
    /// Real long options that are not allowed (for abbreviation resolution).
    known: Vec<String>,
    abbrev: bool,
    numeric: bool,
    options_as_text: bool,
    pub governs: Governs,
    operands: Operands,
    operand_prefix: Option<String>,
    operands_with: Vec<String>,
    pattern_from: Vec<String>,
    max_operands: Option<usize>,
    style: Style,
    /// find: primaries (whole words) and their arity.
    primaries: BTreeMap<String, Arity>,
}

/// The table.
#[derive(Debug, Clone, Default)]
pub struct Grammars {
    by_name: BTreeMap<String, Grammar>,
}

#[derive(Debug, thiserror::Error)]
pub enum GrammarError {
    #[error("the grammar table does not parse: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("grammar `{command}`: {problem}")]
    Invalid { command: String, problem: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    sets: BTreeMap<String, String>,
    command: BTreeMap<String, Entry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    summary: String,
    #[serde(default)]
    options: String,
    #[serde(default)]
    known: String,
    #[serde(default)]
    abbrev: bool,
    #[serde(default)]
    numeric: bool,
    #[serde(default)]
    options_as_text: bool,
    #[serde(default)]
    governs: Option<String>,
    #[serde(default = "default_operands")]
    operands: String,
    #[serde(default)]
    operand_prefix: Option<String>,
    #[serde(default)]
    operands_with: String,
    #[serde(default)]
    pattern_from: String,
    #[serde(default)]
    max_operands: Option<usize>,
    #[serde(default)]
    style: Option<String>,
    #[serde(default)]
    primaries: String,
}

fn default_operands() -> String {
    "none".to_owned()
}

fn invalid(command: &str, problem: impl Into<String>) -> GrammarError {
    GrammarError::Invalid {
        command: command.to_owned(),
        problem: problem.into(),
    }
}

fn value_kind(command: &str, text: &str) -> Result<Value, GrammarError> {
    match text {
        "text" => Ok(Value::Text),
        "path" => Ok(Value::Path),
        "pair" => Ok(Value::Pair),
        other => Err(invalid(
            command,
            format!("unknown value kind {other}", other = code(other)),
        )),
    }
}

/// `-a`, `-n=text`, `-u?=text`, `--all`, `--lines=text`, `--color?=text`.
fn option_token(command: &str, token: &str) -> Result<(String, Arity), GrammarError> {
    let (name, arity) = match token.split_once('=') {
        None => (token, Arity::Flag),
        Some((name, kind)) => match name.strip_suffix('?') {
            Some(name) => (name, Arity::Optional(value_kind(command, kind)?)),
            None => (name, Arity::Required(value_kind(command, kind)?)),
        },
    };
    if !name.starts_with('-') || name.len() < 2 {
        return Err(invalid(
            command,
            format!("{token} is not an option", token = code(token)),
        ));
    }
    Ok((name.to_owned(), arity))
}

fn expand_sets(
    command: &str,
    text: &str,
    sets: &BTreeMap<String, String>,
) -> Result<Vec<String>, GrammarError> {
    let mut out = Vec::new();
    expand_into(command, text, sets, 0, &mut out)?;
    Ok(out)
}

fn expand_into(
    command: &str,
    text: &str,
    sets: &BTreeMap<String, String>,
    depth: usize,
    out: &mut Vec<String>,
) -> Result<(), GrammarError> {
    if depth > 8 {
        return Err(invalid(command, "sets nest more than 8 levels deep"));
    }
    for token in text.split_whitespace() {
        if let Some(set) = token.strip_prefix('@') {
            let body = sets.get(set).ok_or_else(|| {
                invalid(command, format!("unknown set {}", code(&format!("@{set}"))))
            })?;
            expand_into(command, body, sets, depth + 1, out)?;
        } else {
            out.push(token.to_owned());
        }
    }
    Ok(())
}

impl Grammars {
    /// Parses and checks a grammar table.
    pub fn parse(text: &str) -> Result<Self, GrammarError> {
        let file: File = toml::from_str(text)?;
        let mut by_name = BTreeMap::new();
        for (name, entry) in file.command {
            let grammar = compile(&name, entry, &file.sets)?;
            by_name.insert(name, grammar);
        }
        Ok(Self { by_name })
    }

    /// The bundled table. A table that does not load makes no command read-only (and a test
    /// keeps it loading).
    pub fn bundled() -> &'static Grammars {
        static TABLE: OnceLock<Grammars> = OnceLock::new();
        TABLE.get_or_init(|| match Grammars::parse(BUNDLED_GRAMMARS) {
            Ok(table) => table,
            Err(error) => {
                tracing::error!(%error, "the bundled command grammars do not load");
                Grammars::default()
            }
        })
    }

    pub fn get(&self, name: &str) -> Option<&Grammar> {
        self.by_name.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Grammar> {
        self.by_name.values()
    }

    /// The grammar that governs `argv`: the longest `program sub ...` name whose words lead
    /// the argv (the program by its base name).
    pub fn governing(&self, argv: &[String]) -> Option<(&Grammar, usize)> {
        let program = base_name(argv.first()?);
        let mut name = program.to_owned();
        let mut best = self.by_name.get(&name).map(|g| (g, 1));
        for (i, word) in argv.iter().enumerate().skip(1).take(2) {
            if word.starts_with('-') {
                break;
            }
            name.push(' ');
            name.push_str(word);
            if let Some(grammar) = self.by_name.get(&name) {
                best = Some((grammar, i + 1));
            }
        }
        best
    }

    /// Matches `argv` against the table.
    pub fn fit(&self, argv: &[String]) -> Fit {
        let Some((grammar, consumed)) = self.governing(argv) else {
            return Fit::Ungoverned;
        };
        let rest = &argv[consumed..];
        // `cargo test`: a subcommand the table does not describe is not governed.
        let ungoverned = match grammar.governs {
            Governs::Always => false,
            Governs::Subcommands => rest.first().is_some_and(|w| !w.starts_with('-')),
            Governs::FlagsOnly => rest.iter().any(|w| !w.starts_with('-')),
        };
        if ungoverned {
            return Fit::Ungoverned;
        }
        let reject = |reason: String| Fit::Rejected {
            name: grammar.name.clone(),
            reason,
        };
        if rest.len() > MAX_WORDS || rest.iter().any(|w| w.len() > MAX_WORD_BYTES) {
            return reject("the command is too long to check".to_owned());
        }
        let result = match grammar.style {
            Style::Gnu => grammar.parse_gnu(rest),
            Style::Find => grammar.parse_find(rest),
        };
        match result {
            Ok(paths) => Fit::Accepted {
                name: grammar.name.clone(),
                paths,
            },
            Err(reason) => reject(reason),
        }
    }
}

fn compile(
    name: &str,
    entry: Entry,
    sets: &BTreeMap<String, String>,
) -> Result<Grammar, GrammarError> {
    let mut short = BTreeMap::new();
    let mut long = BTreeMap::new();
    let style = match entry.style.as_deref() {
        None | Some("gnu") => Style::Gnu,
        Some("find") => Style::Find,
        Some(other) => {
            return Err(invalid(
                name,
                format!("unknown style {other}", other = code(other)),
            ));
        }
    };
    for token in expand_sets(name, &entry.options, sets)? {
        let (option, arity) = option_token(name, &token)?;
        if let Some(long_name) = option.strip_prefix("--") {
            if long_name.is_empty() {
                return Err(invalid(name, "`--` is not an option"));
            }
            long.insert(option.clone(), arity);
        } else {
            let mut chars = option[1..].chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => {
                    short.insert(c, arity);
                }
                _ => {
                    return Err(invalid(
                        name,
                        format!(
                            "{option}: short options are one letter",
                            option = code(&option)
                        ),
                    ));
                }
            }
        }
    }
    let mut primaries = BTreeMap::new();
    for token in expand_sets(name, &entry.primaries, sets)? {
        let (primary, arity) = option_token(name, &token)?;
        primaries.insert(primary, arity);
    }
    let governs = match entry.governs.as_deref() {
        None | Some("always") => Governs::Always,
        Some("subcommands") => Governs::Subcommands,
        Some("flags-only") => Governs::FlagsOnly,
        Some(other) => {
            return Err(invalid(
                name,
                format!("unknown governs {other}", other = code(other)),
            ));
        }
    };
    let known: Vec<String> = entry.known.split_whitespace().map(str::to_owned).collect();
    if let Some(clash) = known.iter().find(|k| long.contains_key(*k)) {
        return Err(invalid(
            name,
            format!(
                "{clash} is both allowed and known-only",
                clash = code(clash)
            ),
        ));
    }
    let operands = match entry.operands.as_str() {
        "none" => Operands::None,
        "text" => Operands::Text,
        "path" => Operands::Path,
        "pattern-path" => Operands::PatternPath,
        "jq" => Operands::Jq,
        other => {
            return Err(invalid(
                name,
                format!("unknown operands {other}", other = code(other)),
            ));
        }
    };
    Ok(Grammar {
        name: name.to_owned(),
        summary: entry.summary,
        short,
        long,
        known,
        abbrev: entry.abbrev,
        numeric: entry.numeric,
        options_as_text: entry.options_as_text,
        governs,
        operands,
        operand_prefix: entry.operand_prefix,
        operands_with: entry
            .operands_with
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
        pattern_from: entry
            .pattern_from
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
        max_operands: entry.max_operands,
        style,
        primaries,
    })
}

impl Grammar {
    /// The allowed long options, in order (for documentation and tests).
    pub fn long_options(&self) -> impl Iterator<Item = (&str, Arity)> {
        self.long.iter().map(|(k, v)| (k.as_str(), *v))
    }

    pub fn short_options(&self) -> impl Iterator<Item = (char, Arity)> {
        self.short.iter().map(|(k, v)| (*k, *v))
    }

    pub fn primaries(&self) -> impl Iterator<Item = (&str, Arity)> {
        self.primaries.iter().map(|(k, v)| (k.as_str(), *v))
    }

    pub fn options_as_text(&self) -> bool {
        self.options_as_text
    }

    pub fn operand_kind(&self) -> Operands {
        self.operands
    }

    pub fn style(&self) -> Style {
        self.style
    }

    pub fn known_options(&self) -> impl Iterator<Item = &str> {
        self.known.iter().map(String::as_str)
    }

    /// Resolves a long option name (without `=value`) the way getopt_long would.
    // String error: the reason the command line does not parse, shown in the decision.
    fn resolve_long(&self, written: &str) -> Result<(String, Arity), String> {
        if let Some(arity) = self.long.get(written) {
            return Ok((written.to_owned(), *arity));
        }
        if self.known.iter().any(|k| k == written) {
            return Err(format!(
                "{written} is not among the options that only read",
                written = code(written),
            ));
        }
        if !self.abbrev {
            return Err(format!(
                "{written} is not an option this command may be given without a prompt",
                written = code(written),
            ));
        }
        let mut candidates: Vec<&str> = self
            .long
            .keys()
            .map(String::as_str)
            .chain(self.known.iter().map(String::as_str))
            .filter(|full| full.starts_with(written))
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        match candidates.as_slice() {
            [] => Err(format!(
                "{written} is not an option of {}",
                code(&self.name),
                written = code(written)
            )),
            [full] => match self.long.get(*full) {
                Some(arity) => Ok(((*full).to_owned(), *arity)),
                None => Err(format!(
                    "{written} abbreviates {full}, which is not among the options that only read",
                    full = code(full),
                    written = code(written),
                )),
            },
            several => Err(format!(
                "{written} is ambiguous (it abbreviates {})",
                several.join(", "),
                written = code(written),
            )),
        }
    }

    // String error: the reason the command line does not parse, shown in the decision.
    fn parse_gnu(&self, args: &[String]) -> Result<Vec<String>, String> {
        let mut paths = Vec::new();
        let mut operands: Vec<&str> = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        let mut only_operands = false;
        let mut i = 0;
        let value = |kind: Value, word: &str, paths: &mut Vec<String>| {
            if kind == Value::Path {
                paths.push(word.to_owned());
            }
        };
        while i < args.len() {
            let arg = args[i].as_str();
            i += 1;
            if only_operands || arg == "-" || !arg.starts_with('-') {
                operands.push(arg);
                continue;
            }
            if arg == "--" {
                only_operands = true;
                continue;
            }
            if self.numeric && arg[1..].chars().all(|c| c.is_ascii_digit()) {
                continue;
            }
            if arg.starts_with("--") {
                let (written, attached) = match arg.split_once('=') {
                    Some((name, value)) => (name, Some(value)),
                    None => (arg, None),
                };
                let (full, arity) = match self.resolve_long(written) {
                    Ok(found) => found,
                    Err(_) if self.options_as_text => {
                        operands.push(arg);
                        continue;
                    }
                    Err(reason) => return Err(reason),
                };
                match (arity, attached) {
                    (Arity::Flag, Some(_)) => {
                        return Err(format!("{full} takes no value", full = code(&full)));
                    }
                    (Arity::Flag, None) | (Arity::Optional(_), None) => {}
                    (Arity::Optional(kind) | Arity::Required(kind), Some(v)) => {
                        if kind == Value::Pair {
                            return Err(format!(
                                "{full} takes two separate words",
                                full = code(&full)
                            ));
                        }
                        value(kind, v, &mut paths);
                    }
                    (Arity::Required(Value::Pair), None) => {
                        if i + 2 > args.len() {
                            return Err(format!("{full} needs two values", full = code(&full)));
                        }
                        i += 2;
                    }
                    (Arity::Required(kind), None) => {
                        let Some(v) = args.get(i) else {
                            return Err(format!("{full} needs a value", full = code(&full)));
                        };
                        value(kind, v, &mut paths);
                        i += 1;
                    }
                }
                seen.push(full);
                continue;
            }
            // A cluster of short options: `-la`, `-n5`, `-n 5`.
            let cluster = &arg[1..];
            let mut as_text = false;
            for (at, c) in cluster.char_indices() {
                let Some(arity) = self.short.get(&c).copied() else {
                    if self.options_as_text {
                        as_text = true;
                        break;
                    }
                    return Err(format!(
                        "{} is not an option this command may be given without a prompt",
                        code(&format!("-{c}"))
                    ));
                };
                seen.push(format!("-{c}"));
                let rest = &cluster[at + c.len_utf8()..];
                match arity {
                    Arity::Flag => {}
                    Arity::Optional(kind) => {
                        if !rest.is_empty() {
                            value(kind, rest, &mut paths);
                        }
                        break;
                    }
                    Arity::Required(Value::Pair) => {
                        return Err(format!("{} takes two values", code(&format!("-{c}"))));
                    }
                    Arity::Required(kind) => {
                        if rest.is_empty() {
                            let Some(v) = args.get(i) else {
                                return Err(format!("{} needs a value", code(&format!("-{c}"))));
                            };
                            value(kind, v, &mut paths);
                            i += 1;
                        } else {
                            value(kind, rest, &mut paths);
                        }
                        break;
                    }
                }
            }
            if as_text {
                operands.push(arg);
            }
        }
        self.check_operands(&operands, &seen, &mut paths)?;
        Ok(paths)
    }

    // String error: the reason the command line does not parse, shown in the decision.
    fn check_operands(
        &self,
        operands: &[&str],
        seen: &[String],
        paths: &mut Vec<String>,
    ) -> Result<(), String> {
        if operands.is_empty() {
            return Ok(());
        }
        if !self.operands_with.is_empty() && !seen.iter().any(|s| self.operands_with.contains(s)) {
            return Err(format!(
                "{} with operands but without {} does more than read",
                code(&self.name),
                self.operands_with.join(" or "),
            ));
        }
        if let Some(max) = self.max_operands
            && operands.len() > max
        {
            return Err(format!(
                "{} takes at most {max} operand(s) without writing",
                code(&self.name),
            ));
        }
        if let Some(prefix) = &self.operand_prefix
            && let Some(bad) = operands.iter().find(|o| !o.starts_with(prefix.as_str()))
        {
            return Err(format!(
                "the operand {bad} of {}",
                code(&self.name),
                bad = code(bad)
            ));
        }
        match self.operands {
            Operands::None => Err(format!(
                "{} takes no operands here ({})",
                code(&self.name),
                code(operands[0]),
            )),
            Operands::Text => Ok(()),
            Operands::Path => {
                paths.extend(operands.iter().map(|o| (*o).to_owned()));
                Ok(())
            }
            Operands::PatternPath => {
                let given = seen.iter().any(|s| self.pattern_from.contains(s));
                let skip = usize::from(!given);
                paths.extend(operands.iter().skip(skip).map(|o| (*o).to_owned()));
                Ok(())
            }
            Operands::Jq => {
                let (filter, files) = operands.split_first().unwrap_or((&"", &[]));
                if let Some(problem) = jq_filter_problem(filter) {
                    return Err(problem);
                }
                paths.extend(files.iter().map(|o| (*o).to_owned()));
                Ok(())
            }
        }
    }

    // String error: the reason the command line does not parse, shown in the decision.
    fn parse_find(&self, args: &[String]) -> Result<Vec<String>, String> {
        let mut paths = Vec::new();
        let mut i = 0;
        // Leading options.
        while let Some(arg) = args.get(i) {
            let Some(c) = arg.strip_prefix('-').filter(|c| c.len() == 1) else {
                break;
            };
            let Some(letter) = c.chars().next() else {
                break;
            };
            match self.short.get(&letter) {
                Some(Arity::Flag) => i += 1,
                _ => break,
            }
        }
        // Start points: up to the first word that starts an expression.
        while let Some(arg) = args.get(i) {
            if arg.starts_with('-') || matches!(arg.as_str(), "(" | ")" | "!" | ",") {
                break;
            }
            paths.push(arg.clone());
            i += 1;
        }
        // The expression.
        while let Some(arg) = args.get(i) {
            i += 1;
            if matches!(arg.as_str(), "(" | ")" | "!" | ",") {
                continue;
            }
            let Some(arity) = self.primaries.get(arg.as_str()).copied() else {
                return Err(format!(
                    "{} is not a test or action that only reads",
                    code(&format!("find {arg}"))
                ));
            };
            match arity {
                Arity::Flag => {}
                Arity::Required(kind) | Arity::Optional(kind) => {
                    let Some(v) = args.get(i) else {
                        return Err(format!("{} needs a value", code(&format!("find {arg}"))));
                    };
                    if kind == Value::Path {
                        paths.push(v.clone());
                    }
                    i += 1;
                }
            }
        }
        Ok(paths)
    }
}

/// Identifiers a jq filter may not use: they read the environment, files by name, or modules.
const JQ_FORBIDDEN: &[&str] = &[
    "env",
    "ENV",
    "input_filename",
    "import",
    "include",
    "modulemeta",
    "get_search_list",
    "get_prog_origin",
    "get_jq_origin",
    "__loc__",
    "$__prog_args",
    "input_line_number",
    "splits_env",
];

/// Why a jq filter is more than a read of its input, if it is.
pub fn jq_filter_problem(filter: &str) -> Option<String> {
    let bytes = filter.as_bytes();
    let mut start = None;
    for (at, c) in filter
        .char_indices()
        .chain(std::iter::once((filter.len(), ' ')))
    {
        let ident = c.is_ascii_alphanumeric() || c == '_';
        match (start, ident) {
            (None, true) => start = Some(at),
            (Some(from), false) => {
                start = None;
                let word = &filter[from..at];
                // `.env` is a field named env, not the builtin (but `..env` is not).
                let field =
                    from >= 1 && bytes[from - 1] == b'.' && !(from >= 2 && bytes[from - 2] == b'.');
                if !field && JQ_FORBIDDEN.contains(&word) {
                    return Some(format!(
                        "the jq filter uses {word}, which reads more than its input",
                        word = code(word),
                    ));
                }
            }
            _ => {}
        }
    }
    None
}

/// Matches `argv` against the bundled table.
pub fn fit(argv: &[String]) -> Fit {
    Grammars::bundled().fit(argv)
}

#[cfg(test)]
mod tests;
