//! keel-acp's integration tests: one binary, modules under `suite/`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail loudly on purpose"
)]

mod suite;
