//! keel-core integration tests: one binary, one module per area.

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] functions fail loudly on purpose"
)]
#![expect(
    clippy::disallowed_methods,
    reason = "tests set up and inspect their fixtures directly on disk"
)]

mod suite;
