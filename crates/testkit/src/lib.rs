//! Keel test kit.
