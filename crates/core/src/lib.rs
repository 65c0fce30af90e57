//! Keel core.
