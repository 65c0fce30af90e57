//! Outbound HTTP for tools (filled by the web tools owner).
