//! agent (placeholder, filled by its owner).
