//! Test modules, one per area.
mod tools_fs;
