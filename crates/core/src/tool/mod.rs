//! tool (placeholder, filled by its owner).
