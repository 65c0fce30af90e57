//! The ACP server (placeholder, filled by its owner).
