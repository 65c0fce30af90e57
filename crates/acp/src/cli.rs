//! The command line (placeholder, filled by its owner).
