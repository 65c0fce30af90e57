//! The `glob` tool (placeholder).
