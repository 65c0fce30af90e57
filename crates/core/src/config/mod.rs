//! config (placeholder, filled by its owner).
