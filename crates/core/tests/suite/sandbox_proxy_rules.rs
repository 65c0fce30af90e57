//! Which hosts the sandbox's filtering proxy lets a confined command reach: the `shell.net`
//! rules alone, through `Policy::command_host` (the proxy's `HostGate`); `net.fetch` and
//! `web_fetch` rules and answers never open it.

use keel_core::policy::{Mode, Trust};

use super::policy_support::World;

const ALLOW_CRATES: &str = r#"
[[permission]]
permission = "shell.net"
pattern = "*.crates.io"
action = "allow"

[[permission]]
permission = "shell.net"
pattern = "evil.crates.io"
action = "deny"
"#;

/// What lets `web_fetch` reach hosts: it never lets commands reach them.
const ALLOW_FETCHES: &str = r#"
[[permission]]
permission = "net.fetch"
pattern = "*.crates.io"
action = "allow"

[[permission]]
permission = "web_fetch"
pattern = "example.com"
action = "allow"

[[permission]]
permission = "*"
pattern = "docs.rs"
action = "ask"
"#;

#[test]
fn only_hosts_the_rules_allow_without_asking_are_reachable() {
    let world = World::new();
    world.write_global_rules(ALLOW_CRATES);
    let policy = world.policy(Mode::Allowlist, false, Trust::Trusted);
    assert!(policy.commands_reach_any_host());
    assert_eq!(policy.command_host("static.crates.io"), Ok(()));
    let denied = policy.command_host("evil.crates.io").unwrap_err();
    assert!(denied.contains("deny evil.crates.io"), "{denied}");
    let asked = policy.command_host("example.com").unwrap_err();
    assert!(
        asked.contains("no shell.net rule lets shell commands reach example.com"),
        "{asked}"
    );
}

#[test]
fn fetch_rules_never_open_the_proxy() {
    let world = World::new();
    world.write_global_rules(ALLOW_FETCHES);
    let policy = world.policy(Mode::Allowlist, false, Trust::Trusted);
    assert!(!policy.commands_reach_any_host());
    for host in ["static.crates.io", "example.com"] {
        let refused = policy.command_host(host).unwrap_err();
        assert!(refused.contains("a web_fetch answer does not"), "{refused}");
    }
}

#[test]
fn without_an_allow_rule_no_host_is_reachable_whatever_the_mode() {
    let world = World::new();
    // The bundled rules ask for every host: yolo allows calls, not a command's connections.
    let policy = world.policy(Mode::Yolo, false, Trust::Trusted);
    assert!(!policy.commands_reach_any_host());
    assert!(policy.command_host("example.com").is_err());
}

#[test]
fn ask_mode_reaches_nothing() {
    let world = World::new();
    world.write_global_rules(ALLOW_CRATES);
    let policy = world.policy(Mode::Ask, false, Trust::Trusted);
    assert!(!policy.commands_reach_any_host());
    assert!(policy.command_host("static.crates.io").is_err());
}

#[test]
fn an_untrusted_project_cannot_open_the_network() {
    let world = World::new();
    world.write_project_rules(ALLOW_CRATES);
    let untrusted = world.policy(Mode::Allowlist, false, Trust::Untrusted);
    assert!(!untrusted.commands_reach_any_host());
    assert!(untrusted.command_host("static.crates.io").is_err());
    let trusted = world.policy(Mode::Allowlist, false, Trust::Trusted);
    assert!(trusted.commands_reach_any_host());
    assert_eq!(trusted.command_host("static.crates.io"), Ok(()));
}
