//! Keel test kit.
//!
//! - [`mock_model`]: [`MockModel`], a mock model server over real HTTP on 127.0.0.1 speaking
//!   the Anthropic and OpenAI streaming APIs from [`Turn`] scripts, with fault injection.

pub mod mock_model;

pub use mock_model::{Api, Block, Framing, MockModel, RecordedRequest, Reply, Turn};
