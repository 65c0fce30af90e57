//! Keel test kit (dev-only).
//!
//! - [`acp_client`]: an ACP test client that plays the editor (records updates, answers
//!   permission prompts from a script, serves files and terminals).

pub mod acp_client;
