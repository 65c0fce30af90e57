//! policy (in progress)
pub mod commands;
pub mod layers;
pub mod mode;
pub mod rule;
pub mod shell;
pub mod trust;
pub mod wrappers;
pub mod watchdog;
