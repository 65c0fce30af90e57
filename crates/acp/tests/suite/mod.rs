//! End-to-end tests of the ACP server through the test-kit client over in-memory pipes.

mod approvals;
mod binary;
mod cancel;
mod commands;
mod editor;
mod hostile;
mod mcp;
mod modes;
mod protocol;
mod sandbox;
mod sessions;
mod streaming;
mod support;
mod trust;
mod turn_snapshot;
mod turns;
