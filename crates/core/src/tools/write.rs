//! The `write` tool (placeholder).
