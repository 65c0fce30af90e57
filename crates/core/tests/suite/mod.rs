//! Test modules, one per area.
