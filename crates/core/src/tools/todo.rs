//! The `todo` tool (placeholder).
