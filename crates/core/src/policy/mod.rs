//! policy (placeholder, filled by its owner).
