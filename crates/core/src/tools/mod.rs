//! tools (placeholder, filled by its owner).
