//! Keel's engine.
//!
//! Principal types (each module opens with its own overview):
//! - [`contract`]: the types every layer shares (a tool's kind and subject, a call's target,
//!   progress, file stamps, Keel's own failures), depending on nothing else in keel-core.
//! - [`tool`]: the tool contract (`ToolSpec`, the `Tool` trait, the result `Envelope`, the registry).
//! - [`capability`]: `RequirementSet` and the compiled `Scope` the runtime checks every access against.
//! - [`runtime`]: `Runtime`, the only surface through which tools reach files, processes and the network.
//! - [`tools`]: the locked tools.
//! - [`policy`]: the permission engine: rules, scopes, approval keys, modes, watchdog.
//! - [`provider`]: model providers (Anthropic, OpenAI-compatible, scripted) streaming `ModelEvent`s.
//! - [`agent`]: the turn loop, emitting front-end-neutral events.
//! - [`store`]: the session store: one append-only event log per conversation.
//! - [`config`]: layered TOML configuration.
//! - [`skills`]: `SKILL.md` folders, listed in the system prompt and loaded by `skill`.
//! - [`front_matter`]: Markdown front matter, read the same way for agents and skills.

pub mod agent;
pub mod capability;
pub mod config;
pub mod contract;
pub mod front_matter;
pub mod mcp;
pub mod policy;
pub mod provider;
pub mod runtime;
pub mod skills;
pub mod store;
pub mod tool;
pub mod tools;
