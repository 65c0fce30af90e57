//! The `grep` tool (placeholder).
