//! Test modules, one per area.

mod tools_search;
mod tools_shell;
