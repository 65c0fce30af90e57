//! The `bash` tool (placeholder).
