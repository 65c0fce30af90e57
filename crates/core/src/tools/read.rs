//! The `read` tool (placeholder).
