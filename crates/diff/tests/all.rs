//! keel-diff's integration tests, in one test binary.

#[path = "all/fixtures.rs"]
mod fixtures;
#[path = "all/robustness.rs"]
mod robustness;
