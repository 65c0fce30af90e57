//! Other agents' tool names, resolved to Keel's tools when a model calls them.
//!
//! A model trained on Claude Code, Gemini CLI, Codex or opencode calls `Read`, `read_file`,
//! `shell`, `read {filePath}` ... [`ALIASES`] is the one table of those names and argument
//! names, each mapped to a Keel tool with its arguments translated. Aliases are never offered
//! to the model (two names for one tool are a trap: the model alternates between them); they
//! are looked up only when a call names no tool of the session, or names one with another
//! agent's argument names (opencode's `read {filePath}`). The translated call then goes through
//! the canonical tool's whole path (schema, policy and approval keys, run) as if the model had
//! called it; an argument the table does not know is left as it is, so the canonical schema
//! rejects it as usual. The result carries a `_deprecation` block naming the tool to use
//! ([`crate::tool::Deprecation`]), and the log a warning.
//!
//! Argument names were checked against each agent's published tool definitions (Claude Code's
//! tool schemas, Gemini CLI's `packages/core/src/tools`, Codex's `codex-rs` tool specs,
//! opencode's `packages/opencode/src/tool`); docs/tools.md lists them.

use serde_json::{Map, Value};

use crate::tool::Deprecation;

/// Whose names an alias carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    ClaudeCode,
    GeminiCli,
    Codex,
    Opencode,
}

impl Agent {
    pub fn name(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "Claude Code",
            Agent::GeminiCli => "Gemini CLI",
            Agent::Codex => "Codex",
            Agent::Opencode => "opencode",
        }
    }
}

/// What becomes of one of an alias's arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// Renamed, value unchanged.
    To(&'static str),
    /// A 0-based line number, made 1-based.
    LineFrom0(&'static str),
    /// An argument vector (`["bash", "-lc", "cargo test"]`) made a command line (`cargo test`);
    /// a string is kept.
    Argv(&'static str),
    /// Text holding a URL: its first `http(s)://` URL.
    FirstUrl(&'static str),
    /// An expected number of replacements: more than one means "replace all".
    ManyToAll(&'static str),
    /// A last line (inclusive): with the first line (argument `start`, default 1), a count.
    EndLine {
        to: &'static str,
        start: &'static str,
    },
    /// A flag: `true` sets `to` to `value`, `false` is dropped.
    Flag {
        to: &'static str,
        value: &'static str,
    },
    /// A plan's items: each item's fields renamed by `fields`; items `cancelled` dropped.
    Items {
        to: &'static str,
        fields: &'static [(&'static str, &'static str)],
    },
    /// An agent name: the agents' own default (`general-purpose`) dropped.
    AgentName(&'static str),
    /// Meaningful only as `false`: dropped then, refused when `true` (with `why`).
    OnlyFalse(&'static str),
    /// Nothing Keel acts on (an explanation for a human, a display hint): dropped.
    Drop,
}

/// One alias: another agent's tool name, the Keel tool it runs, its argument translations.
#[derive(Debug, Clone, Copy)]
pub struct Alias {
    pub agent: Agent,
    pub name: &'static str,
    pub tool: &'static str,
    /// Translations of the alias's arguments; any other argument is passed as it is.
    pub args: &'static [(&'static str, Arg)],
    /// Arguments the Keel tool needs that the alias implies (when the call does not set them).
    pub defaults: &'static [(&'static str, &'static str)],
}

const fn alias(
    agent: Agent,
    name: &'static str,
    tool: &'static str,
    args: &'static [(&'static str, Arg)],
) -> Alias {
    Alias {
        agent,
        name,
        tool,
        args,
        defaults: &[],
    }
}

/// Every file below the listed directory: a directory listing as `glob` gives it.
const LISTING: &[(&str, &str)] = &[("pattern", "**/*")];

const NO_BACKGROUND: &str = "Keel's `bash` runs commands in the foreground only";

const CODEX_SHELL: &[(&str, Arg)] = &[
    ("command", Arg::Argv("command")),
    ("workdir", Arg::To("cwd")),
    ("timeout_ms", Arg::To("timeout")),
    ("timeout", Arg::To("timeout")),
    ("with_escalated_permissions", Arg::To("unsandboxed")),
    ("sandbox_permissions", Arg::Drop),
    ("justification", Arg::Drop),
    ("prefix_rule", Arg::Drop),
    ("login", Arg::Drop),
];

/// The table. An alias whose name is also a Keel tool's (opencode's `read`) applies only to a
/// call that uses one of its argument names the Keel tool does not have.
pub const ALIASES: &[Alias] = &[
    // Claude Code: the same argument names as Keel's tools, other tool names.
    alias(Agent::ClaudeCode, "Read", "read", &[]),
    alias(Agent::ClaudeCode, "Write", "write", &[]),
    alias(Agent::ClaudeCode, "Edit", "edit", &[]),
    alias(
        Agent::ClaudeCode,
        "Bash",
        "bash",
        &[("run_in_background", Arg::OnlyFalse(NO_BACKGROUND))],
    ),
    alias(Agent::ClaudeCode, "Glob", "glob", &[]),
    alias(Agent::ClaudeCode, "Grep", "grep", &[]),
    Alias {
        defaults: LISTING,
        ..alias(Agent::ClaudeCode, "LS", "glob", &[("ignore", Arg::Drop)])
    },
    alias(Agent::ClaudeCode, "TodoWrite", "todo", &[]),
    alias(
        Agent::ClaudeCode,
        "WebFetch",
        "web_fetch",
        &[("prompt", Arg::Drop)],
    ),
    alias(Agent::ClaudeCode, "WebSearch", "web_search", &[]),
    alias(
        Agent::ClaudeCode,
        "Task",
        "task",
        &[("subagent_type", Arg::AgentName("agent"))],
    ),
    // Gemini CLI (older and newer argument names).
    alias(
        Agent::GeminiCli,
        "read_file",
        "read",
        &[
            ("absolute_path", Arg::To("file_path")),
            ("path", Arg::To("file_path")),
            ("offset", Arg::LineFrom0("offset")),
            ("start_line", Arg::To("offset")),
            (
                "end_line",
                Arg::EndLine {
                    to: "limit",
                    start: "start_line",
                },
            ),
        ],
    ),
    alias(Agent::GeminiCli, "write_file", "write", &[]),
    alias(
        Agent::GeminiCli,
        "replace",
        "edit",
        &[
            ("expected_replacements", Arg::ManyToAll("replace_all")),
            ("allow_multiple", Arg::To("replace_all")),
            ("instruction", Arg::Drop),
        ],
    ),
    alias(
        Agent::GeminiCli,
        "run_shell_command",
        "bash",
        &[
            ("directory", Arg::To("cwd")),
            ("dir_path", Arg::To("cwd")),
            ("is_background", Arg::OnlyFalse(NO_BACKGROUND)),
        ],
    ),
    alias(
        Agent::GeminiCli,
        "glob",
        "glob",
        &[
            ("dir_path", Arg::To("path")),
            ("case_sensitive", Arg::Drop),
            ("respect_git_ignore", Arg::Drop),
            ("respect_gemini_ignore", Arg::Drop),
        ],
    ),
    alias(
        Agent::GeminiCli,
        "search_file_content",
        "grep",
        &[("dir_path", Arg::To("path")), ("include", Arg::To("glob"))],
    ),
    alias(
        Agent::GeminiCli,
        "grep_search",
        "grep",
        &[
            ("dir_path", Arg::To("path")),
            ("include", Arg::To("glob")),
            ("include_pattern", Arg::To("glob")),
            ("context", Arg::To("-C")),
            ("after", Arg::To("-A")),
            ("before", Arg::To("-B")),
            (
                "names_only",
                Arg::Flag {
                    to: "output_mode",
                    value: "files_with_matches",
                },
            ),
        ],
    ),
    Alias {
        defaults: LISTING,
        ..alias(
            Agent::GeminiCli,
            "list_directory",
            "glob",
            &[
                ("dir_path", Arg::To("path")),
                ("ignore", Arg::Drop),
                ("file_filtering_options", Arg::Drop),
            ],
        )
    },
    alias(
        Agent::GeminiCli,
        "web_fetch",
        "web_fetch",
        &[("prompt", Arg::FirstUrl("url"))],
    ),
    alias(Agent::GeminiCli, "google_web_search", "web_search", &[]),
    alias(
        Agent::GeminiCli,
        "write_todos",
        "todo",
        &[(
            "todos",
            Arg::Items {
                to: "todos",
                fields: &[("description", "content")],
            },
        )],
    ),
    // Codex.
    alias(Agent::Codex, "shell", "bash", CODEX_SHELL),
    alias(Agent::Codex, "container.exec", "bash", CODEX_SHELL),
    alias(Agent::Codex, "shell_command", "bash", CODEX_SHELL),
    alias(
        Agent::Codex,
        "update_plan",
        "todo",
        &[
            (
                "plan",
                Arg::Items {
                    to: "todos",
                    fields: &[("step", "content")],
                },
            ),
            ("explanation", Arg::Drop),
        ],
    ),
    // opencode: mostly Keel's tool names with camel-case arguments.
    alias(
        Agent::Opencode,
        "read",
        "read",
        &[
            ("filePath", Arg::To("file_path")),
            ("offset", Arg::LineFrom0("offset")),
        ],
    ),
    alias(
        Agent::Opencode,
        "write",
        "write",
        &[("filePath", Arg::To("file_path"))],
    ),
    alias(
        Agent::Opencode,
        "edit",
        "edit",
        &[
            ("filePath", Arg::To("file_path")),
            ("oldString", Arg::To("old_string")),
            ("newString", Arg::To("new_string")),
            ("replaceAll", Arg::To("replace_all")),
        ],
    ),
    alias(
        Agent::Opencode,
        "bash",
        "bash",
        &[("workdir", Arg::To("cwd"))],
    ),
    alias(
        Agent::Opencode,
        "grep",
        "grep",
        &[("include", Arg::To("glob"))],
    ),
    Alias {
        defaults: LISTING,
        ..alias(Agent::Opencode, "list", "glob", &[("ignore", Arg::Drop)])
    },
    alias(
        Agent::Opencode,
        "patch",
        "apply_patch",
        &[("patchText", Arg::To("input"))],
    ),
    alias(
        Agent::Opencode,
        "apply_patch",
        "apply_patch",
        &[("patchText", Arg::To("input"))],
    ),
    alias(
        Agent::Opencode,
        "todowrite",
        "todo",
        &[(
            "todos",
            Arg::Items {
                to: "todos",
                fields: &[],
            },
        )],
    ),
    alias(
        Agent::Opencode,
        "webfetch",
        "web_fetch",
        &[("timeout", Arg::To("timeout_seconds"))],
    ),
    alias(
        Agent::Opencode,
        "task",
        "task",
        &[("subagent_type", Arg::AgentName("agent"))],
    ),
];

/// A call resolved through an alias.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub alias: &'static Alias,
    /// The translated arguments, or why they cannot be translated (a schema error of the
    /// canonical tool).
    // String error: the reason the model reads for an alias call that does not translate.
    pub input: Result<Value, String>,
}

impl Resolved {
    /// The `_deprecation` block of the call's result.
    pub fn deprecation(&self) -> Deprecation {
        let Alias {
            agent, name, tool, ..
        } = *self.alias;
        let message = if name == tool {
            format!(
                "These are {}'s argument names for `{tool}`; Keel translated them. Call `{tool}` \
                 with the argument names of its schema.",
                agent.name()
            )
        } else {
            format!(
                "`{name}` is {}'s name; Keel ran its own `{tool}`. Call `{tool}` (with the \
                 argument names of its schema) instead.",
                agent.name()
            )
        };
        Deprecation {
            this_tool: name.to_owned(),
            use_instead: tool.to_owned(),
            message,
        }
    }
}

/// The alias a call of `name` with `args` goes through, if any. `properties(tool)` gives the
/// argument names of a tool the session has (`None` when it has no such tool): an alias whose
/// Keel tool is missing does not apply, and one whose name is a tool of the session applies
/// only to arguments that tool does not take.
pub fn resolve(
    name: &str,
    args: &Value,
    properties: &dyn Fn(&str) -> Option<Vec<String>>,
) -> Option<Resolved> {
    let own = properties(name);
    ALIASES
        .iter()
        .filter(|alias| alias.name == name)
        .find(|alias| {
            let Some(canonical) = properties(alias.tool) else {
                return false;
            };
            match &own {
                None => true,
                // A tool of the session by that name (a Keel tool, or an extension tool that
                // took another agent's name) keeps its calls, unless it is the alias's own Keel
                // tool called with the alias's argument names.
                Some(_) => {
                    alias.tool == name
                        && args.as_object().is_some_and(|given| {
                            given.keys().any(|key| {
                                !canonical.contains(key)
                                    && alias.args.iter().any(|(arg, _)| arg == key)
                            })
                        })
                }
            }
        })
        .map(|alias| Resolved {
            alias,
            input: translate(alias, args),
        })
}

/// The Keel tool's arguments for an alias call's.
// String error: the reason the model reads for an alias call that does not translate.
pub fn translate(alias: &Alias, args: &Value) -> Result<Value, String> {
    let Some(given) = args.as_object() else {
        return Err(format!(
            "the arguments of `{}` are not an object",
            alias.name
        ));
    };
    let mut out = Map::new();
    for (key, value) in given {
        match alias.args.iter().find(|(arg, _)| arg == key) {
            Some((_, rule)) => apply(alias.name, key, *rule, value, given, &mut out)?,
            None => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    for (key, value) in alias.defaults {
        out.entry(*key)
            .or_insert_with(|| Value::String((*value).to_owned()));
    }
    Ok(Value::Object(out))
}

// String error: the reason the model reads for an alias call that does not translate.
fn apply(
    name: &str,
    key: &str,
    rule: Arg,
    value: &Value,
    given: &Map<String, Value>,
    out: &mut Map<String, Value>,
) -> Result<(), String> {
    let wrong = |what: &str| format!("`{key}` of `{name}` must be {what}, not {value}");
    match rule {
        Arg::To(to) => {
            out.insert(to.to_owned(), value.clone());
        }
        Arg::LineFrom0(to) => {
            let line = value
                .as_u64()
                .ok_or_else(|| wrong("a line number from 0"))?;
            out.insert(to.to_owned(), Value::from(line + 1));
        }
        Arg::Argv(to) => {
            let line = match value {
                Value::String(line) => line.clone(),
                Value::Array(items) => {
                    let words: Vec<&str> = items
                        .iter()
                        .map(Value::as_str)
                        .collect::<Option<_>>()
                        .ok_or_else(|| wrong("an array of strings"))?;
                    command_line(&words)
                }
                _ => return Err(wrong("an array of strings")),
            };
            out.insert(to.to_owned(), Value::String(line));
        }
        Arg::FirstUrl(to) => {
            let text = value.as_str().ok_or_else(|| wrong("text"))?;
            let url = first_url(text).ok_or_else(|| {
                format!("`{key}` of `{name}` holds no http(s) URL; `web_fetch` fetches one `url`")
            })?;
            out.insert(to.to_owned(), Value::String(url));
        }
        Arg::ManyToAll(to) => {
            let count = value.as_u64().ok_or_else(|| wrong("a number"))?;
            out.insert(to.to_owned(), Value::Bool(count > 1));
        }
        Arg::EndLine { to, start } => {
            let end = value.as_u64().ok_or_else(|| wrong("a line number"))?;
            let first = given.get(start).and_then(Value::as_u64).unwrap_or(1);
            let count = end.checked_sub(first).map(|n| n + 1).ok_or_else(|| {
                format!("`{key}` ({end}) of `{name}` comes before `{start}` ({first})")
            })?;
            out.insert(to.to_owned(), Value::from(count));
        }
        Arg::Flag { to, value: set } => match value.as_bool() {
            Some(true) => {
                out.insert(to.to_owned(), Value::String(set.to_owned()));
            }
            Some(false) => {}
            None => return Err(wrong("true or false")),
        },
        Arg::Items { to, fields } => {
            let items = value.as_array().ok_or_else(|| wrong("a list"))?;
            let mut translated = Vec::with_capacity(items.len());
            for item in items {
                let Some(item) = item.as_object() else {
                    return Err(wrong("a list of objects"));
                };
                if item.get("status").and_then(Value::as_str) == Some("cancelled") {
                    continue;
                }
                let mut renamed = Map::new();
                for (field, v) in item {
                    let field = fields
                        .iter()
                        .find(|(from, _)| from == field)
                        .map_or(field.as_str(), |(_, to)| to);
                    renamed.insert(field.to_owned(), v.clone());
                }
                translated.push(Value::Object(renamed));
            }
            out.insert(to.to_owned(), Value::Array(translated));
        }
        Arg::AgentName(to) => {
            if value.as_str() != Some("general-purpose") {
                out.insert(to.to_owned(), value.clone());
            }
        }
        Arg::OnlyFalse(why) => match value.as_bool() {
            Some(false) => {}
            _ => {
                return Err(format!(
                    "`{key}: {value}` of `{name}` is not supported: {why}"
                ));
            }
        },
        Arg::Drop => {}
    }
    Ok(())
}

/// An argument vector as one command line: the script of `bash -lc SCRIPT` (and `sh -c`,
/// `zsh -c`) as it is, anything else quoted word by word.
fn command_line(words: &[&str]) -> String {
    if let [shell, flag, script] = words {
        let shell = shell.rsplit('/').next().unwrap_or(shell);
        if matches!(shell, "bash" | "sh" | "zsh" | "dash") && matches!(*flag, "-c" | "-lc" | "-cl")
        {
            return (*script).to_owned();
        }
    }
    shell_words::join(words)
}

/// The first `http://` or `https://` URL in `text`, without trailing punctuation.
fn first_url(text: &str) -> Option<String> {
    let start = ["https://", "http://"]
        .iter()
        .filter_map(|scheme| text.find(scheme))
        .min()?;
    let rest = &text[start..];
    let end = rest
        .find(|c: char| c.is_whitespace() || matches!(c, '<' | '>' | '"' | '`'))
        .unwrap_or(rest.len());
    let url = rest[..end].trim_end_matches(['.', ',', ';', ':', ')', ']', '\'', '!', '?']);
    Some(url.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The argument names of the bundled tools.
    fn properties(tool: &str) -> Option<Vec<String>> {
        let registry = crate::tools::bundled(&|_| None).ok()?;
        let spec = registry.get(tool)?.spec().clone();
        Some(
            spec.parameters["properties"]
                .as_object()
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default(),
        )
    }

    fn resolved(name: &str, args: Value) -> (String, Value) {
        let resolved = resolve(name, &args, &properties).unwrap_or_else(|| panic!("{name}"));
        (resolved.alias.tool.to_owned(), resolved.input.unwrap())
    }

    #[test]
    fn every_alias_names_a_bundled_tool_and_its_arguments() {
        for alias in ALIASES {
            let Some(names) = properties(alias.tool) else {
                panic!("`{}` names no bundled tool `{}`", alias.name, alias.tool);
            };
            for (_, rule) in alias.args {
                let to = match rule {
                    Arg::To(to)
                    | Arg::LineFrom0(to)
                    | Arg::Argv(to)
                    | Arg::FirstUrl(to)
                    | Arg::ManyToAll(to)
                    | Arg::AgentName(to)
                    | Arg::EndLine { to, .. }
                    | Arg::Flag { to, .. }
                    | Arg::Items { to, .. } => *to,
                    Arg::OnlyFalse(_) | Arg::Drop => continue,
                };
                assert!(names.iter().any(|n| n == to), "{}: {to}", alias.name);
            }
            // A name may appear twice only for different agents.
            let twins = ALIASES
                .iter()
                .filter(|a| a.name == alias.name && a.agent == alias.agent)
                .count();
            assert_eq!(twins, 1, "{}", alias.name);
        }
    }

    #[test]
    fn arguments_are_translated() {
        assert_eq!(
            resolved(
                "read_file",
                json!({"absolute_path": "/w/a.rs", "offset": 0, "limit": 5})
            ),
            (
                "read".into(),
                json!({"file_path": "/w/a.rs", "offset": 1, "limit": 5})
            )
        );
        assert_eq!(
            resolved(
                "read_file",
                json!({"file_path": "a.rs", "start_line": 3, "end_line": 7})
            ),
            (
                "read".into(),
                json!({"file_path": "a.rs", "offset": 3, "limit": 5})
            )
        );
        assert_eq!(
            resolved(
                "shell",
                json!({"command": ["bash", "-lc", "cargo test && echo ok"], "workdir": "src", "timeout_ms": 5000})
            ),
            (
                "bash".into(),
                json!({"command": "cargo test && echo ok", "cwd": "src", "timeout": 5000})
            )
        );
        assert_eq!(
            resolved("shell", json!({"command": ["ls", "-l", "a b"]})).1,
            json!({"command": "ls -l 'a b'"})
        );
        assert_eq!(
            resolved(
                "update_plan",
                json!({"explanation": "x", "plan": [{"step": "Build", "status": "in_progress"}]})
            ),
            (
                "todo".into(),
                json!({"todos": [{"content": "Build", "status": "in_progress"}]})
            )
        );
        assert_eq!(
            resolved(
                "write_todos",
                json!({"todos": [{"description": "A", "status": "pending"}, {"description": "B", "status": "cancelled"}]})
            )
            .1,
            json!({"todos": [{"content": "A", "status": "pending"}]})
        );
        assert_eq!(
            resolved(
                "web_fetch",
                json!({"prompt": "Summarize https://docs.rs/serde. Thanks"})
            ),
            ("web_fetch".into(), json!({"url": "https://docs.rs/serde"}))
        );
        assert_eq!(
            resolved(
                "Task",
                json!({"prompt": "p", "description": "d", "subagent_type": "general-purpose"})
            )
            .1,
            json!({"prompt": "p", "description": "d"})
        );
        assert_eq!(
            resolved("LS", json!({"path": "src"})),
            ("glob".into(), json!({"path": "src", "pattern": "**/*"}))
        );
        assert_eq!(
            resolved("replace", json!({"file_path": "a", "old_string": "x", "new_string": "y", "expected_replacements": 3, "instruction": "why"})).1,
            json!({"file_path": "a", "old_string": "x", "new_string": "y", "replace_all": true})
        );
        assert_eq!(
            resolved("patch", json!({"patchText": "*** Begin Patch"})),
            ("apply_patch".into(), json!({"input": "*** Begin Patch"}))
        );
    }

    #[test]
    fn keel_names_resolve_only_with_foreign_arguments() {
        // Keel's own call: no alias.
        assert!(resolve("read", &json!({"file_path": "a", "offset": 2}), &properties).is_none());
        assert!(resolve("web_fetch", &json!({"url": "https://x.dev"}), &properties).is_none());
        // opencode's: translated, its 0-based offset made 1-based.
        assert_eq!(
            resolved("read", json!({"filePath": "a", "offset": 0})),
            ("read".into(), json!({"file_path": "a", "offset": 1}))
        );
        assert_eq!(
            resolved(
                "edit",
                json!({"filePath": "a", "oldString": "x", "newString": "y"})
            )
            .1,
            json!({"file_path": "a", "old_string": "x", "new_string": "y"})
        );
        // A session tool that took another agent's name keeps its calls.
        let extension = |tool: &str| -> Option<Vec<String>> {
            match tool {
                "read_file" => Some(vec!["absolute_path".to_owned()]),
                other => properties(other),
            }
        };
        assert!(resolve("read_file", &json!({"absolute_path": "a"}), &extension).is_none());
        // Unknown names stay unknown; unknown arguments are passed on for the schema to refuse.
        assert!(resolve("Frobnicate", &json!({}), &properties).is_none());
        assert_eq!(
            resolved("Read", json!({"file_path": "a", "bogus": 1})).1,
            json!({"file_path": "a", "bogus": 1})
        );
    }

    #[test]
    fn untranslatable_arguments_say_why() {
        let error = |name: &str, args: Value| {
            resolve(name, &args, &properties)
                .unwrap()
                .input
                .unwrap_err()
        };
        assert!(
            error("Bash", json!({"command": "x", "run_in_background": true}))
                .contains("foreground only")
        );
        assert!(error("web_fetch", json!({"prompt": "no link here"})).contains("no http(s) URL"));
        assert!(
            error("read_file", json!({"file_path": "a", "offset": "x"}))
                .contains("line number from 0")
        );
        assert!(error("shell", json!({"command": [1, 2]})).contains("array of strings"));
        let block = resolve("Read", &json!({}), &properties)
            .unwrap()
            .deprecation();
        assert_eq!(
            (block.this_tool.as_str(), block.use_instead.as_str()),
            ("Read", "read")
        );
        assert!(block.message.contains("Claude Code"), "{}", block.message);
    }
}
