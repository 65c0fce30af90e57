//! Keel's front-ends: the ACP server (`keel acp`), the headless host (`keel exec`), the offline
//! demo (`keel demo`) and the command line that ties them together.

pub mod cli;
pub mod server;
