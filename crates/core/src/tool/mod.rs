//! The tool contract.
//!
//! - [`ToolSpec`]: what a tool publishes: id, description, JSON-Schema parameters,
//!   [`RequirementSet`](crate::capability::RequirementSet),
//!   ACP kind hint, whether it mutates, which argument names its subject, where it came from.
//! - [`Tool`]: a typed tool. Its parameters are a Rust type; the schema is derived from it
//!   (schemars), and arguments are validated against that schema before `run` is called.
//! - [`DynTool`]: the object-safe form the registry holds (typed tools through [`Typed`], MCP tools
//!   directly).
//! - [`ToolOutput`] / [`ToolError`]: what a run produces; [`Envelope`] is the uniform result the
//!   model, the recorder and the front-ends see.
//! - [`ToolContext`]: what a run gets: the [`Runtime`](crate::runtime::Runtime) surface, the
//!   session's state, the abort signal, a progress sink. [`Asker`] is the session's way to the
//!   human for the `question` tool.
//! - [`Registry`]: the tools of a session, in documentation order; rejects duplicate ids.

mod context;
mod envelope;
mod question;
mod registry;
mod spec;
pub mod view;

/// Defined in the leaf every layer shares ([`crate::contract`]).
pub use crate::contract::{
    CallTarget, CommandTarget, ErrorSource, FileStamp, InternalError, Origin, ProgressBudget,
    ProgressSink, Subject, ToolError, ToolKind, ToolProgress,
};
pub use context::{Asker, Limits, SessionState, SubagentRequest, Subagents, ToolContext, head_of};
pub use envelope::{
    Artifact, Deprecation, Envelope, EnvelopeKind, Metadata, PlanEntry, TodoPriority, TodoStatus,
    ToolOutput,
};
pub use question::{QuestionItem, QuestionOption};
pub use registry::{BundledTool, Registry, RegistryError};
pub use spec::{
    CallPath, CallView, Describe, DynTool, JsonTool, Location, ParsedCall, Prepared, Preview, Tool,
    ToolSpec, Typed, validate_with,
};
