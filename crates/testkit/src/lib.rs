//! Keel test kit.
//!
//! - [`mock_model`]: [`MockModel`], a mock model server over real HTTP on 127.0.0.1 speaking
//!   the Anthropic and OpenAI streaming APIs from [`Turn`] scripts, with fault injection.
//! - [`acp_client`]: an ACP test client that plays the editor (records updates, answers
//!   permission prompts from a script, serves files and terminals).
//! - [`protocol_fuzz`]: hostile JSON-RPC input for an agent's wire and the rules an agent must
//!   keep under it (the property test and the fuzz target share it).
//! - [`measure`]: load average and `/proc/PID/status` fields, for benchmarks and resource tests.

pub mod acp_client;
pub mod measure;
pub mod mock_model;
pub mod protocol_fuzz;

pub use mock_model::{Api, Block, Framing, MockModel, RecordedRequest, Reply, Turn};
