//! Test modules, one per area.

mod policy_api;
mod policy_support;
mod policy_table;
