//! Test modules, one per area.
pub mod agent;
