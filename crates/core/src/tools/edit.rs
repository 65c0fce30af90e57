//! The `edit` tool (placeholder).
