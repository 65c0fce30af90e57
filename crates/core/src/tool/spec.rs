//! Tool specifications and the typed/dynamic tool traits.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ToolContext, ToolError, ToolOutput};
use crate::capability::RequirementSet;
use crate::contract::{CallTarget, Origin, Subject, ToolKind};

/// What a tool publishes at registration.
#[derive(Debug, Clone, Serialize)]
pub struct ToolSpec {
    pub id: String,
    pub description: String,
    /// JSON Schema of the arguments (inlined, no `$ref`), as the model receives it.
    pub parameters: Value,
    pub requires: RequirementSet,
    pub kind: ToolKind,
    /// The title a call gets when its arguments say nothing better ("Edit a file"); the id by
    /// default (MCP and extension tools).
    pub title: String,
    /// Mutating calls are serialized and gated; read-only calls may run in parallel.
    pub mutating: bool,
    pub subject: Subject,
    pub origin: Origin,
    /// A short paragraph added once to the system prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_hint: Option<String>,
    /// Whether the model is offered the tool. A tool that cannot work as configured (web
    /// search with no search service) stays registered, so a call still gets its explanation,
    /// but costs the model nothing to read.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unavailable: bool,
    /// The tool whose decisions the permission engine gives this one's calls (its rules,
    /// approval keys and remembered answers): `bg_start` is decided as `bash`. `None`: its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_as: Option<String>,
}

impl ToolSpec {
    /// A spec whose parameters are derived from `P`. Mutating by default.
    pub fn new<P: JsonSchema>(id: &str, description: &str) -> Self {
        Self {
            id: id.to_owned(),
            description: description.to_owned(),
            parameters: schema_for::<P>(),
            requires: RequirementSet::default(),
            kind: ToolKind::Other,
            title: id.to_owned(),
            mutating: true,
            subject: Subject::None,
            origin: Origin::Bundled,
            prompt_hint: None,
            unavailable: false,
            decided_as: None,
        }
    }

    /// The permission engine decides this tool's calls as calls of `tool` with the same
    /// arguments (see [`ToolSpec::decided_as`]).
    pub fn decided_as(mut self, tool: &str) -> Self {
        self.decided_as = Some(tool.to_owned());
        self
    }

    /// The tool id the permission engine decides calls under.
    pub fn policy_id(&self) -> &str {
        self.decided_as.as_deref().unwrap_or(&self.id)
    }

    /// Not offered to the model (see [`ToolSpec::unavailable`]).
    pub fn unavailable(mut self, unavailable: bool) -> Self {
        self.unavailable = unavailable;
        self
    }

    pub fn kind(mut self, kind: ToolKind) -> Self {
        self.kind = kind;
        self
    }

    /// The title of a call whose arguments give nothing better.
    pub fn title(mut self, title: &str) -> Self {
        self.title = title.to_owned();
        self
    }

    pub fn read_only(mut self) -> Self {
        self.mutating = false;
        self
    }

    pub fn requires(mut self, requires: RequirementSet) -> Self {
        self.requires = requires;
        self
    }

    pub fn subject(mut self, subject: Subject) -> Self {
        self.subject = subject;
        self
    }

    pub fn hint(mut self, hint: &str) -> Self {
        self.prompt_hint = Some(hint.to_owned());
        self
    }

    pub fn origin(mut self, origin: Origin) -> Self {
        self.origin = origin;
        self
    }

    /// The parameters as the model is sent them: what a model needs to write a valid call, with
    /// less to read. The schema's own "Arguments of `x`" line goes (the tool's description says
    /// it); an optional property's `null` alternative is dropped (leaving it out means the same);
    /// `additionalProperties: false` goes (a model writes the properties it is shown, and an
    /// unknown one is still refused). Arguments are validated against [`ToolSpec::parameters`]
    /// itself, so nothing dropped here is accepted.
    pub fn model_schema(&self) -> Value {
        let mut schema = self.parameters.clone();
        if let Value::Object(map) = &mut schema {
            map.remove("description");
        }
        drop_optional_nulls(&mut schema);
        drop_closed_objects(&mut schema);
        schema
    }
}

/// The schema the model sees: draft 2020-12, subschemas inlined (some OpenAI-compatible servers
/// reject `$ref`), no `$schema`/`title`, no schemars-only integer formats.
pub fn schema_for<P: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<P>().to_value();
    strip_noise(&mut schema);
    schema
}

/// In every object schema, turns `"type": [T, "null"]` and `anyOf: [X, {"type": "null"}]` of a
/// property that is not required into `T` and `X`.
fn drop_optional_nulls(schema: &mut Value) {
    let Value::Object(map) = schema else {
        return;
    };
    let required: Vec<String> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(|name| name.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if !required.contains(name) {
                drop_null_alternative(property);
            }
            drop_optional_nulls(property);
        }
    }
    if let Some(items) = map.get_mut("items") {
        drop_optional_nulls(items);
    }
}

/// Removes every `"additionalProperties": false`, at any depth.
fn drop_closed_objects(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.get("additionalProperties") == Some(&Value::Bool(false)) {
                map.remove("additionalProperties");
            }
            map.values_mut().for_each(drop_closed_objects);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_closed_objects),
        _ => {}
    }
}

fn drop_null_alternative(property: &mut Value) {
    let Value::Object(map) = property else {
        return;
    };
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.retain(|value| !value.is_null());
    }
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            map.insert("type".into(), only);
        }
        return;
    }
    let Some(Value::Array(alternatives)) = map.get("anyOf") else {
        return;
    };
    let is_null = |v: &Value| v.get("type").and_then(Value::as_str) == Some("null");
    let rest: Vec<&Value> = alternatives.iter().filter(|v| !is_null(v)).collect();
    if let [Value::Object(only)] = rest.as_slice()
        && rest.len() < alternatives.len()
    {
        let only = only.clone();
        map.remove("anyOf");
        for (key, value) in only {
            // The property's own description is the one the model reads.
            map.entry(key).or_insert(value);
        }
    }
}

/// Integer and float formats schemars emits that mean nothing to a model or a validator.
const SCHEMARS_FORMATS: &[&str] = &[
    "uint", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "double",
    "float",
];

fn strip_noise(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("title");
            map.remove("$schema");
            // `#[serde(default)]` on an optional field: a null default says only "optional".
            if map.get("default") == Some(&Value::Null) {
                map.remove("default");
            }
            if let Some(Value::String(format)) = map.get("format")
                && SCHEMARS_FORMATS.contains(&format.as_str())
            {
                map.remove("format");
            }
            // The items of a described array: "one of them" is all their description can add.
            if map.contains_key("description")
                && let Some(Value::Object(items)) = map.get_mut("items")
            {
                items.remove("description");
            }
            for v in map.values_mut() {
                strip_noise(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_noise),
        _ => {}
    }
}

/// What a gated call shows the user before it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Preview {
    /// The change an edit or write would make, computed once before anything is written, in
    /// the diff crate's bounded ACP form (the whole texts up to 1 MiB, only the hunks past it).
    Diff(keel_diff::AcpDiff),
    /// The diffs of a change to several files (a patch), one per file, in the patch's order.
    Diffs(Vec<keel_diff::AcpDiff>),
    /// The command a shell call would run, and where.
    Command { command: String, cwd: String },
}

/// A place a call touches: an absolute path and, when known, a 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    pub path: String,
    pub line: Option<u32>,
}

/// How a call is shown before it runs: produced by the tool from its typed arguments
/// ([`Tool::describe`]), so no front-end has to guess argument names.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CallView {
    /// "Read src/main.rs (1-40)", "cargo test", "Edit src/lib.rs".
    pub title: String,
    /// The places the call will touch (paths made absolute, not yet resolved on disk).
    pub locations: Vec<Location>,
}

/// What [`Tool::describe`] gets besides the arguments: how paths are shown.
#[derive(Debug, Clone, Copy)]
pub struct Describe<'a> {
    /// The workspace roots, canonical; the first is the primary one.
    pub roots: &'a [std::path::PathBuf],
}

impl Describe<'_> {
    /// `path` relative to the root that contains it (`.` for a root), else as given.
    pub fn shown(&self, path: &str) -> String {
        let candidate = std::path::Path::new(path);
        if candidate.is_absolute() {
            for root in self.roots {
                if let Ok(relative) = candidate.strip_prefix(root) {
                    let shown = relative.display().to_string();
                    return if shown.is_empty() { ".".into() } else { shown };
                }
            }
        }
        path.to_owned()
    }

    /// `path` made absolute against the primary root, without touching the disk.
    pub fn absolute(&self, path: &str) -> String {
        let candidate = std::path::Path::new(path);
        match self.roots.first() {
            Some(root) if path.is_empty() || path == "." => root.display().to_string(),
            Some(root) if !candidate.is_absolute() => root
                .join(candidate.strip_prefix("./").unwrap_or(candidate))
                .display()
                .to_string(),
            _ => path.to_owned(),
        }
    }

    /// A location at `path` (made absolute).
    pub fn location(&self, path: &str, line: Option<u32>) -> Location {
        Location {
            path: self.absolute(path),
            line,
        }
    }
}

/// What a tool prepared for a call before it runs: the preview the user is asked about and
/// the plan the run carries out (the bytes to write, the stamp of what was read), computed
/// once. [`Tool::run_prepared`] gets it back; nothing is read or diffed twice.
pub struct Prepared {
    pub preview: Option<Preview>,
    plan: Box<dyn std::any::Any + Send + Sync>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("preview", &self.preview)
            .finish_non_exhaustive()
    }
}

impl Prepared {
    pub fn new<P: Send + Sync + 'static>(preview: Option<Preview>, plan: P) -> Self {
        Self {
            preview,
            plan: Box::new(plan),
        }
    }

    /// For a tool that previews nothing: the path the engine resolved and decided on, as the
    /// plan the run acts on (resolving the argument again could reach another place: a symlink
    /// swapped in since the decision).
    pub fn decided_path(subject: Option<&std::path::Path>) -> Option<Self> {
        subject.map(|subject| Self::new(None, subject.to_path_buf()))
    }

    /// The plan, as the tool that made it stored it.
    pub fn plan<P: 'static>(self) -> Result<P, ToolError> {
        self.plan.downcast::<P>().map(|plan| *plan).map_err(|_| {
            ToolError::invariant(
                "running a tool call",
                "a prepared call reached another tool",
            )
        })
    }
}

/// A typed tool. Implement this; register it wrapped in [`Typed`].
pub trait Tool: Send + Sync + 'static {
    type Params: DeserializeOwned + JsonSchema + Send + Sync + 'static;

    fn spec(&self) -> ToolSpec;

    fn run(
        &self,
        params: Self::Params,
        ctx: &ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send;

    /// What the call acts on, from its arguments ([`CallTarget`], shaped as the spec's
    /// [`Subject`]). The default is [`CallTarget::None`] (a tool without a subject).
    fn target(&self, _params: &Self::Params) -> CallTarget {
        CallTarget::None
    }

    /// The call's title and locations, from its arguments. The default is the spec's title.
    fn describe(&self, _params: &Self::Params, _how: Describe<'_>) -> CallView {
        CallView::default()
    }

    /// Prepares a call once, before the policy's prompt and the run: reads what it must read
    /// and computes the preview. `subject` is the call's subject path, resolved once and
    /// checked by the engine. `None` (the default) means there is nothing to prepare and the
    /// run is [`Tool::run`].
    fn prepare(
        &self,
        _params: &Self::Params,
        _subject: Option<&std::path::Path>,
        _ctx: &ToolContext,
    ) -> impl Future<Output = Result<Option<Prepared>, ToolError>> + Send {
        async { Ok(None) }
    }

    /// Runs a call [`Tool::prepare`] prepared. Only called with what `prepare` returned.
    fn run_prepared(
        &self,
        params: Self::Params,
        _prepared: Prepared,
        ctx: &ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send {
        self.run(params, ctx)
    }
}

/// A call whose arguments were validated against the schema and deserialized, once.
pub struct ParsedCall {
    /// What the call acts on, as its tool read it from the arguments.
    pub target: CallTarget,
    /// The subject path, resolved once (set by the engine before the capability check).
    pub subject: Option<std::path::PathBuf>,
    /// How the call is shown.
    pub view: CallView,
    /// What `prepare` made, once it ran.
    pub prepared: Option<Prepared>,
    /// The files a [`Subject::Paths`] call acts on (resolved by the engine before the
    /// capability check); empty for other tools.
    pub paths: Vec<CallPath>,
    params: Box<dyn std::any::Any + Send + Sync>,
}

/// A file a [`Subject::Paths`] call acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallPath {
    /// As the arguments wrote it.
    pub user: String,
    /// Resolved once, by the engine (or [`DynTool::parse_checked`]).
    pub canonical: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for ParsedCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParsedCall")
            .field("target", &self.target)
            .field("subject", &self.subject)
            .field("view", &self.view)
            .field("prepared", &self.prepared)
            .finish_non_exhaustive()
    }
}

impl ParsedCall {
    /// A call of a tool whose arguments stay JSON (MCP and extension tools), validated by the
    /// caller against the tool's schema just before. Titled by the spec.
    pub fn json(spec: &ToolSpec, args: &Value) -> Self {
        crate::runtime::tally::count(crate::runtime::tally::Event::Parse);
        Self {
            target: CallTarget::from_json(&spec.subject, args),
            subject: None,
            view: CallView {
                title: spec.title.clone(),
                locations: Vec::new(),
            },
            prepared: None,
            paths: Vec::new(),
            params: Box::new(args.clone()),
        }
    }

    /// A call whose arguments a tool parsed itself (a [`DynTool`] implemented directly), acting
    /// on the files `paths` ([`Subject::Paths`]).
    pub fn with_params<P: Send + Sync + 'static>(
        params: P,
        view: CallView,
        paths: Vec<String>,
    ) -> Self {
        crate::runtime::tally::count(crate::runtime::tally::Event::Parse);
        Self {
            target: CallTarget::None,
            subject: None,
            view,
            prepared: None,
            paths: paths
                .into_iter()
                .map(|user| CallPath {
                    user,
                    canonical: None,
                })
                .collect(),
            params: Box::new(params),
        }
    }

    /// The arguments of a call made by [`ParsedCall::with_params`].
    pub fn params<P: 'static>(&self) -> Result<&P, ToolError> {
        self.params.downcast_ref::<P>().ok_or_else(|| {
            ToolError::invariant("running a tool call", "a parsed call reached another tool")
        })
    }

    /// The arguments of a call made by [`ParsedCall::json`], borrowed.
    pub fn args_json(&self) -> Result<Value, ToolError> {
        self.params.downcast_ref::<Value>().cloned().ok_or_else(|| {
            ToolError::invariant("running a tool call", "a parsed call reached another tool")
        })
    }

    /// The arguments of a call made by [`ParsedCall::json`].
    pub fn into_json(self) -> Result<Value, ToolError> {
        self.params
            .downcast::<Value>()
            .map(|args| *args)
            .map_err(|_| {
                ToolError::invariant("running a tool call", "a parsed call reached another tool")
            })
    }

    /// The preview computed by `prepare`, if any.
    pub fn preview(&self) -> Option<&Preview> {
        self.prepared.as_ref().and_then(|p| p.preview.as_ref())
    }
}

/// The object-safe tool the registry holds. A call goes [`DynTool::parse`] (schema check and
/// deserialization, once) → the engine resolves and checks the subject once → policy →
/// [`DynTool::prepare`] (reads and preview, once) → approval → [`DynTool::run`].
pub trait DynTool: Send + Sync {
    fn spec(&self) -> &ToolSpec;
    /// Validates `args` against the schema and deserializes them. A failure is a
    /// [`ToolError::InvalidArguments`]. `how` shows the call's paths.
    fn parse(&self, args: &Value, how: Describe<'_>) -> Result<ParsedCall, ToolError>;
    /// Reads what the call needs and computes its preview (stored in `call.prepared`).
    fn prepare<'a>(
        &'a self,
        call: &'a mut ParsedCall,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<(), ToolError>>;
    /// Runs a parsed (and maybe prepared) call.
    fn run<'a>(
        &'a self,
        call: ParsedCall,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;
    /// Validates `args` only.
    fn validate(&self, args: &Value) -> Result<(), ToolError> {
        self.parse(args, Describe { roots: &[] }).map(|_| ())
    }
    /// What the user would be shown for a call: parse, resolve and check the subject, prepare;
    /// the preview of the prepared call. For the command line and tests.
    fn preview<'a>(
        &'a self,
        args: &'a Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Option<Preview>, ToolError>> {
        Box::pin(async move {
            let mut call = self.parse_checked(args, ctx)?;
            self.prepare(&mut call, ctx).await?;
            Ok(call.prepared.and_then(|prepared| prepared.preview))
        })
    }
    /// [`DynTool::parse`], then the subject path resolved and checked against the scope.
    fn parse_checked(&self, args: &Value, ctx: &ToolContext) -> Result<ParsedCall, ToolError> {
        let mut call = self.parse(
            args,
            Describe {
                roots: ctx.runtime.roots(),
            },
        )?;
        if let Some(path) = call.target.path() {
            let access = if self.spec().mutating {
                crate::capability::Access::Write
            } else {
                crate::capability::Access::Read
            };
            call.subject = Some(ctx.runtime.resolve_checked(path, access)?);
        }
        for path in &mut call.paths {
            path.canonical = Some(
                ctx.runtime
                    .resolve_checked(&path.user, crate::capability::Access::Write)?,
            );
        }
        Ok(call)
    }
    /// The whole path without the engine's gates: parse, resolve and check the subject,
    /// prepare, run. For the command line, benches and tests.
    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let mut call = self.parse_checked(&args, ctx)?;
            self.prepare(&mut call, ctx).await?;
            self.run(call, ctx).await
        })
    }
}

/// Adapts a typed [`Tool`] to [`DynTool`]: compiles the schema validator once.
pub struct Typed<T: Tool> {
    tool: T,
    spec: ToolSpec,
    validator: jsonschema::Validator,
}

impl<T: Tool> std::fmt::Debug for Typed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Typed").field("id", &self.spec.id).finish()
    }
}

impl<T: Tool> Typed<T> {
    /// Wraps a tool. Fails only if its own derived schema does not compile (a programming error
    /// surfaced at registration, not at call time).
    pub fn wrap(tool: T) -> Result<Arc<dyn DynTool>, ToolError> {
        let spec = tool.spec();
        let validator = jsonschema::validator_for(&spec.parameters).map_err(|e| {
            ToolError::invariant(
                "registering a tool",
                format!("tool `{}` has an invalid parameter schema: {e}", spec.id),
            )
        })?;
        Ok(Arc::new(Self {
            tool,
            spec,
            validator,
        }))
    }

    fn params(call: &ParsedCall) -> Result<&T::Params, ToolError> {
        call.params.downcast_ref::<T::Params>().ok_or_else(|| {
            ToolError::invariant("running a tool call", "a parsed call reached another tool")
        })
    }
}

/// Validates arguments with a compiled validator; the error lists every violation.
pub fn validate_with(
    validator: &jsonschema::Validator,
    tool: &str,
    args: &Value,
) -> Result<(), ToolError> {
    let messages: Vec<String> = validator
        .iter_errors(args)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() {
                e.to_string()
            } else {
                format!("{path}: {e}")
            }
        })
        .collect();
    if messages.is_empty() {
        Ok(())
    } else {
        Err(ToolError::InvalidArguments {
            tool: tool.to_owned(),
            message: messages.join("; "),
        })
    }
}

/// A tool whose arguments stay JSON, checked against its compiled parameter schema (MCP tools,
/// extension tools). [`DynTool`] comes with it: `parse` and `validate` check the arguments,
/// `run` hands them to [`JsonTool::run_json`].
pub trait JsonTool: Send + Sync {
    /// The tool's spec and the validator compiled from its parameter schema.
    fn json_spec(&self) -> (&ToolSpec, &jsonschema::Validator);

    /// What a call acts on when the tool derives it from its arguments rather than reading it
    /// from the field its [`Subject`] names (an extension tool's command line, filled from its
    /// template). `None` (the default): [`CallTarget::from_json`].
    fn target_json(&self, _args: &Value) -> Option<CallTarget> {
        None
    }

    /// Computes a parsed call's preview (stored in `call.prepared`); none by default.
    fn prepare_json<'a>(
        &'a self,
        _call: &'a mut ParsedCall,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<(), ToolError>> {
        Box::pin(async { Ok(()) })
    }

    /// Runs a call with its validated arguments.
    fn run_json<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;
}

impl<T: JsonTool> DynTool for T {
    fn spec(&self) -> &ToolSpec {
        self.json_spec().0
    }

    fn parse(&self, args: &Value, _how: Describe<'_>) -> Result<ParsedCall, ToolError> {
        self.validate(args)?;
        let mut call = ParsedCall::json(self.spec(), args);
        if let Some(target) = self.target_json(args) {
            call.target = target;
        }
        Ok(call)
    }

    fn prepare<'a>(
        &'a self,
        call: &'a mut ParsedCall,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<(), ToolError>> {
        self.prepare_json(call, ctx)
    }

    fn run<'a>(
        &'a self,
        call: ParsedCall,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move { self.run_json(call.into_json()?, ctx).await })
    }

    fn validate(&self, args: &Value) -> Result<(), ToolError> {
        let (spec, validator) = self.json_spec();
        validate_with(validator, &spec.id, args)
    }
}

impl<T: Tool> DynTool for Typed<T> {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn parse(&self, args: &Value, how: Describe<'_>) -> Result<ParsedCall, ToolError> {
        crate::runtime::tally::count(crate::runtime::tally::Event::Parse);
        validate_with(&self.validator, &self.spec.id, args)?;
        let params: T::Params =
            T::Params::deserialize(args).map_err(|e| ToolError::InvalidArguments {
                tool: self.spec.id.clone(),
                message: e.to_string(),
            })?;
        let mut view = self.tool.describe(&params, how);
        if view.title.is_empty() {
            view.title = self.spec.title.clone();
        }
        Ok(ParsedCall {
            target: self.tool.target(&params),
            subject: None,
            view,
            prepared: None,
            paths: Vec::new(),
            params: Box::new(params),
        })
    }

    fn prepare<'a>(
        &'a self,
        call: &'a mut ParsedCall,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<(), ToolError>> {
        Box::pin(async move {
            let params = Self::params(call)?;
            let prepared = self
                .tool
                .prepare(params, call.subject.as_deref(), ctx)
                .await?;
            call.prepared = prepared;
            Ok(())
        })
    }

    fn run<'a>(
        &'a self,
        call: ParsedCall,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let params = call.params.downcast::<T::Params>().map_err(|_| {
                ToolError::invariant("running a tool call", "a parsed call reached another tool")
            })?;
            match call.prepared {
                Some(prepared) => self.tool.run_prepared(*params, prepared, ctx).await,
                None => self.tool.run(*params, ctx).await,
            }
        })
    }
}

#[cfg(test)]
mod tests;
