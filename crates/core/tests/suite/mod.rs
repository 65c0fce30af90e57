//! Test modules, one per area.
mod config;
