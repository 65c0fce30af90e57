//! Keel diff.
