//! Extension tools: tools declared in tool files of the user's or the project's configuration
//! directory (`~/.config/keel/tools/*.toml`, `<workspace>/.keel/tools/*.toml`), per the seeds'
//! tool contract.
//!
//! A tool file declares `id`, `description`, `parameters` (a JSON Schema, as TOML), `argv` (the
//! command as an argument vector whose elements may hold `{param}` placeholders), and optionally
//! `enabled`, `timeoutMs`, `read_only` and `kind`. Arguments are validated against the schema,
//! then each placeholder is replaced by the parameter's value; the vector is run through the
//! runtime's command path (sandbox helper, own process group, output capped with a sidecar),
//! each element quoted on its own, so a parameter is never shell syntax. An element that is
//! exactly `{param}` disappears when the parameter is absent. A project's tool files wait for
//! project trust; a bundled (locked) id can never be declared.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::Value;

use crate::runtime::process::OutputCapture;
use crate::tool::view::{escaped, quoted};
use crate::tool::{
    DynTool, JsonTool, Origin, ParsedCall, Prepared, Preview, Subject, ToolContext, ToolError,
    ToolKind, ToolOutput, ToolSpec,
};

/// A call's time limit unless the file says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The [`Subject::Command`] field of an extension tool: no argument of the model's, the command
/// line is the template filled ([`JsonTool::target_json`]).
const FILLED_COMMAND: &str = "(the filled argv)";

/// The directory of tool files under a configuration directory.
pub const TOOLS_DIR: &str = "tools";

/// A tool file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolFile {
    pub id: String,
    pub description: String,
    #[serde(default = "empty_object")]
    pub parameters: toml::Value,
    pub argv: Vec<String>,
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(rename = "timeoutMs", default)]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub read_only: bool,
    #[serde(default)]
    pub kind: Option<ToolKind>,
}

fn yes() -> bool {
    true
}

fn empty_object() -> toml::Value {
    let mut table = toml::Table::new();
    table.insert("type".into(), toml::Value::String("object".into()));
    toml::Value::Table(table)
}

/// A tool from a tool file.
pub struct ExtensionTool {
    spec: ToolSpec,
    argv: Vec<String>,
    validator: jsonschema::Validator,
    timeout: Duration,
}

impl std::fmt::Debug for ExtensionTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtensionTool")
            .field("id", &self.spec.id)
            .finish()
    }
}

/// Why a tool file makes no tool; the message names what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ToolFileError {
    /// The file could not be read.
    #[error(transparent)]
    Read(std::io::Error),
    /// The file is not valid TOML, or not a tool file's shape.
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    #[error("`argv` is empty")]
    EmptyArgv,
    #[error("`parameters` is not a JSON Schema: {0}")]
    NotSchema(#[source] serde_json::Error),
    #[error("`parameters` is not a valid JSON Schema: {0}")]
    InvalidSchema(#[source] Box<jsonschema::ValidationError<'static>>),
}

impl ExtensionTool {
    /// Builds the tool of a parsed file; the error names what is wrong.
    pub fn from_file(file: ToolFile, origin: Origin) -> Result<Arc<dyn DynTool>, ToolFileError> {
        Ok(Arc::new(Self::build(file, origin)?))
    }

    /// [`ExtensionTool::from_file`], unwrapped.
    pub fn build(file: ToolFile, origin: Origin) -> Result<Self, ToolFileError> {
        if file.argv.is_empty() {
            return Err(ToolFileError::EmptyArgv);
        }
        let parameters =
            serde_json::to_value(&file.parameters).map_err(ToolFileError::NotSchema)?;
        let validator = jsonschema::validator_for(&parameters)
            .map_err(|e| ToolFileError::InvalidSchema(Box::new(e)))?;
        let mut spec = ToolSpec {
            id: file.id.clone(),
            description: file.description,
            parameters,
            requires: crate::capability::RequirementSet::default(),
            kind: file.kind.unwrap_or(if file.read_only {
                ToolKind::Read
            } else {
                ToolKind::Execute
            }),
            title: file.id.clone(),
            mutating: !file.read_only,
            // Decided as the command line it runs, filled from the model's arguments: the
            // grammars, the rules on commands and the watchdog judge what runs, not the tool's
            // name (an argument filled into a `sh -c` script is shell code).
            subject: Subject::Command(FILLED_COMMAND.to_owned()),
            origin,
            prompt_hint: None,
            unavailable: false,
            decided_as: None,
        };
        spec.unavailable = !file.enabled;
        Ok(Self {
            spec,
            argv: file.argv,
            validator,
            timeout: file
                .timeout_ms
                .map_or(DEFAULT_TIMEOUT, Duration::from_millis),
        })
    }

    /// The argument vector for validated `args`.
    pub fn fill(&self, args: &Value) -> Vec<String> {
        let value_of = |name: &str| -> Option<String> {
            match args.get(name)? {
                Value::String(s) => Some(s.clone()),
                Value::Null => None,
                other => Some(other.to_string()),
            }
        };
        let mut out = Vec::with_capacity(self.argv.len());
        for element in &self.argv {
            if let Some(name) = element
                .strip_prefix('{')
                .and_then(|rest| rest.strip_suffix('}'))
                .filter(|name| !name.contains(['{', '}']))
            {
                if let Some(value) = value_of(name) {
                    out.push(value);
                }
                continue;
            }
            let mut filled = String::new();
            let mut rest = element.as_str();
            while let Some(start) = rest.find('{') {
                filled.push_str(&rest[..start]);
                let after = &rest[start + 1..];
                match after.find('}') {
                    Some(end) => {
                        filled.push_str(&value_of(&after[..end]).unwrap_or_default());
                        rest = &after[end + 1..];
                    }
                    None => {
                        filled.push('{');
                        rest = after;
                    }
                }
            }
            filled.push_str(rest);
            out.push(filled);
        }
        out
    }

    /// Runs the tool with arguments [`DynTool::parse`] validated.
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let argv = self.fill(&args);
        let command = shell_words::join(&argv);
        let cwd = ctx.runtime.root().to_path_buf();
        let mut process = ctx.runtime.spawn_shell(&command, &cwd)?;
        let capture = OutputCapture {
            limit: ctx.session.limits.bash_bytes,
            sidecar: ctx.session.next_sidecar(&self.spec.id),
        };
        let output = process
            .wait_with_output(capture, self.timeout, &ctx.cancel, &ctx.progress)
            .await?;
        if !output.success() {
            return Err(ToolError::external(format!(
                "`{}` exited with {}:\n{}",
                argv.first().map_or("", String::as_str),
                output
                    .exit_code
                    .map_or_else(|| "a signal".to_owned(), |c| format!("status {c}")),
                output.text
            )));
        }
        let mut result = ToolOutput::text(output.text);
        result.output_path = output.output_path;
        Ok(result)
    }
}

impl JsonTool for ExtensionTool {
    fn json_spec(&self) -> (&ToolSpec, &jsonschema::Validator) {
        (&self.spec, &self.validator)
    }

    /// The command line the template makes, decided as a `bash` line run in the workspace.
    fn target_json(&self, args: &Value) -> Option<crate::tool::CallTarget> {
        Some(crate::tool::CallTarget::command(&shell_words::join(
            self.fill(args),
        )))
    }

    /// The preview: the command line the template makes.
    fn prepare_json<'a>(
        &'a self,
        call: &'a mut ParsedCall,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<(), ToolError>> {
        Box::pin(async move {
            let preview = Preview::Command {
                command: shell_words::join(self.fill(&call.args_json()?)),
                cwd: ctx.runtime.root().display().to_string(),
            };
            call.prepared = Some(Prepared::new(Some(preview), ()));
            Ok(())
        })
    }

    fn run_json<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(self.run(args, ctx))
    }
}

/// The tools of the tool files in `config_dir/tools`, and a line per file that could not be
/// loaded ("path: why").
pub fn load_dir(config_dir: &Path, origin: &Origin) -> (Vec<Arc<dyn DynTool>>, Vec<String>) {
    load_dir_in(config_dir, origin, None)
}

/// [`load_dir`], reading only inside `project` when it is given (a project's tool files).
fn load_dir_in(
    config_dir: &Path,
    origin: &Origin,
    project: Option<&Path>,
) -> (Vec<Arc<dyn DynTool>>, Vec<String>) {
    let dir = config_dir.join(TOOLS_DIR);
    let mut tools = Vec::new();
    let mut errors = Vec::new();
    let files = match crate::runtime::config_files::toml_files(&dir) {
        Ok(files) => files,
        Err(e) => {
            errors.push(format!("{}: {e}", dir.display()));
            return (tools, errors);
        }
    };
    for path in files {
        match load_file(&path, origin, project) {
            Ok(tool) => tools.push(tool),
            Err(why) => errors.push(format!("{}: {why}", path.display())),
        }
    }
    (tools, errors)
}

fn load_file(
    path: &Path,
    origin: &Origin,
    project: Option<&Path>,
) -> Result<Arc<dyn DynTool>, ToolFileError> {
    let read = match project {
        Some(root) => crate::runtime::config_files::read_project_file(root, path),
        None => crate::runtime::config_files::read_if_exists(path),
    };
    let text = read.map_err(ToolFileError::Read)?.unwrap_or_default();
    let file: ToolFile = toml::from_str(&text)?;
    ExtensionTool::from_file(file, origin.clone())
}

/// The project's tool files as the trust question lists them ("adds tool `x` running `sh`
/// (.keel/tools/x.toml)"): a tool file names a program, so trusting the project runs it.
pub fn waiting_for_trust(workspace: &Path) -> Vec<String> {
    let dir = workspace.join(crate::policy::trust::PROJECT_TOOLS_DIR);
    let files = crate::runtime::config_files::toml_files(&dir).unwrap_or_default();
    files
        .into_iter()
        .map(|path| {
            let relative = path
                .strip_prefix(workspace)
                .unwrap_or(&path)
                .display()
                .to_string();
            let text = match crate::runtime::config_files::read_project_file(workspace, &path) {
                Ok(text) => text,
                Err(error) => {
                    return escaped(&format!("refuses the tool file {relative}: {error}"));
                }
            };
            let parsed = text.and_then(|text| toml::from_str::<ToolFile>(&text).ok());
            match parsed {
                Some(file) => format!(
                    "adds tool {} running the program {} with the arguments [{}] ({})",
                    quoted(&file.id),
                    file.argv.first().map_or_else(|| quoted(""), |p| quoted(p)),
                    file.argv
                        .iter()
                        .skip(1)
                        .map(|arg| quoted(arg))
                        .collect::<Vec<_>>()
                        .join(", "),
                    quoted(&relative)
                ),
                None => format!("adds a tool ({})", quoted(&relative)),
            }
        })
        .collect()
}

/// Adds the user's tools (`global_dir/tools`) and, when `trusted`, the project's
/// (`workspace/.keel/tools`) to `registry`. A bundled id is never replaced; a project tool
/// shadows a user tool of the same id. Returns what was left out, one line each.
pub fn extend_registry(
    registry: &mut crate::tool::Registry,
    global_dir: Option<&Path>,
    workspace: &Path,
    trusted: bool,
) -> Vec<String> {
    let locked: Vec<String> = registry.specs().map(|s| s.id.clone()).collect();
    let mut notes = Vec::new();
    let mut layers: Vec<(PathBuf, Origin)> = Vec::new();
    if let Some(dir) = global_dir {
        layers.push((dir.to_path_buf(), Origin::Global));
    }
    let project = workspace.join(".keel");
    if trusted {
        layers.push((project, Origin::Project));
    } else if crate::runtime::config_files::toml_files(&project.join(TOOLS_DIR))
        .is_ok_and(|files| !files.is_empty())
    {
        notes.push(format!(
            "the project's tool files ({}) wait for project trust",
            project.join(TOOLS_DIR).display()
        ));
    }
    for (dir, origin) in layers {
        let inside = matches!(origin, Origin::Project).then_some(workspace);
        let (tools, errors) = load_dir_in(&dir, &origin, inside);
        notes.extend(errors);
        for tool in tools {
            let id = tool.spec().id.clone();
            if locked.contains(&id) {
                notes.push(format!(
                    "the {origin} tool `{id}` is left out: `{id}` is a locked tool"
                ));
                continue;
            }
            if let Err(error) = crate::tool::Registry::new().register(tool.clone()) {
                notes.push(format!("the {origin} tool is left out: {error}"));
                continue;
            }
            if let Some(shadowed) = registry.register_shadowing(tool) {
                notes.push(format!(
                    "the {origin} tool `{id}` shadows the {} one",
                    shadowed.spec().origin
                ));
            }
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_templates_fill_whole_elements_and_parts() {
        let file: ToolFile = toml::from_str(
            r#"
            id = "count"
            description = "Count."
            argv = ["wc", "{flag}", "--file={path}", "{path}"]
            [parameters]
            type = "object"
            required = ["path"]
            [parameters.properties.path]
            type = "string"
            [parameters.properties.flag]
            type = "string"
            "#,
        )
        .unwrap();
        let tool = ExtensionTool::build(file, Origin::Project).unwrap();
        let args = serde_json::json!({"path": "a b; rm -rf /"});
        assert_eq!(
            tool.fill(&args),
            ["wc", "--file=a b; rm -rf /", "a b; rm -rf /"]
        );
        assert!(tool.validate(&serde_json::json!({})).is_err());
        assert_eq!(
            shell_words::split(&shell_words::join(tool.fill(&args))).unwrap(),
            tool.fill(&args)
        );
    }
}
