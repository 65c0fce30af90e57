//! keel-acp's integration tests: one binary, modules under `suite/`.

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail loudly on purpose"
)]
#![expect(
    clippy::disallowed_methods,
    reason = "tests set up and inspect workspaces directly"
)]

mod suite;
