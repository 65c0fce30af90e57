//! keel-core integration tests: one binary, one module per area.

mod suite;
