//! End-to-end tests of the ACP server through the test-kit client over in-memory pipes.

mod approvals;
mod binary;
mod cancel;
mod commands;
mod editor;
mod faults;
mod hostile;
mod instructions;
mod mcp;
mod model_errors;
mod models;
mod modes;
mod process_faults;
mod protocol;
mod questions;
mod sandbox;
mod sessions;
mod skills;
mod slash_commands;
mod streaming;
mod subagents;
mod support;
mod trust;
mod turn_snapshot;
mod turns;
mod wire_properties;
