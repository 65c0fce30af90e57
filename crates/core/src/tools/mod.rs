//! The locked tools. Each file is one tool: its parameters type, its spec and its handler.

pub mod bash;
pub mod edit;
pub mod glob;
pub mod grep;
pub mod question;
pub mod read;
pub mod text;
pub mod todo;
pub mod web_fetch;
pub mod web_search;
pub mod write;
