//! Test modules, one per area.

mod agent;
mod config;
mod config_trust;
mod hard_links;
mod policy_api;
mod policy_grammar;
mod policy_support;
mod policy_table;
mod provider_anthropic;
mod provider_faults;
mod provider_models;
mod provider_openai;
mod provider_resolve;
mod provider_scripted;
mod provider_sse;
mod provider_support;
mod runtime_files;
mod sandbox_escalation;
mod sandbox_proxy_rules;
mod search_sensitive;
mod tool_errors;
mod tool_support;
mod tools_fs;
mod tools_search;
mod tools_shell;
mod tools_web;
