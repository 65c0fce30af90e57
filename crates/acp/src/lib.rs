//! Keel ACP.
