//! runtime (placeholder, filled by its owner).
