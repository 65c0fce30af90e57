//! provider (placeholder, filled by its owner).
