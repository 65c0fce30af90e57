//! A regular file with several hard links is not provably inside the workspace: the policy
//! asks before a tool reads (or rewrites, which shows its old content) one, in every mode,
//! saying why; a headless run denies it.

use keel_core::policy::{Action, Call, Decision, Mode, Trust};
use serde_json::{Value, json};

use super::policy_support::{World, spec};

fn decide(world: &World, mode: Mode, headless: bool, tool: &str, args: Value) -> Decision {
    let policy = world.policy(mode, headless, Trust::Trusted);
    let runtime = world.runtime("wide");
    let spec = spec(tool);
    policy.decide(&Call {
        spec: &spec,
        target: &super::policy_support::target(&spec, &args),
        runtime: &runtime,
    })
}

/// `ws/linked.txt` is a second name of `outside/secret.txt`; `ws/via_link` a symlink to it.
fn world() -> World {
    let world = World::new();
    std::fs::hard_link(
        world.outside.join("secret.txt"),
        world.ws.join("linked.txt"),
    )
    .unwrap();
    std::os::unix::fs::symlink("linked.txt", world.ws.join("via_link")).unwrap();
    world
}

#[test]
fn reading_a_hard_linked_file_asks_and_says_why() {
    let world = world();
    for path in ["linked.txt", "via_link", "./src/../linked.txt"] {
        let decision = decide(
            &world,
            Mode::Allowlist,
            false,
            "read",
            json!({"file_path": path}),
        );
        assert_eq!(
            decision.action,
            Action::Ask,
            "{path}: {}",
            decision.explanation
        );
        let why = decision.explanation.to_string();
        assert!(why.contains("has 2 hard links"), "{why}");
        assert!(why.contains("`linked.txt`"), "{why}");
        assert_eq!(decision.hard_links, Some(2));
        assert_eq!(decision.always_scope, None, "asked every time");
    }
    // An ordinary file is still allowed, and carries no link fact.
    let plain = decide(
        &world,
        Mode::Allowlist,
        false,
        "read",
        json!({"file_path": "README.md"}),
    );
    assert_eq!(plain.action, Action::Allow);
    assert_eq!(plain.hard_links, None);
}

#[test]
fn every_tool_on_a_hard_linked_path_asks_in_every_mode() {
    let world = world();
    for mode in [Mode::Allowlist, Mode::Ask, Mode::Yolo, Mode::ReadOnly] {
        for (tool, args) in [
            ("read", json!({"file_path": "linked.txt"})),
            ("grep", json!({"path": "linked.txt"})),
            ("glob", json!({"path": "linked.txt"})),
            ("edit", json!({"file_path": "linked.txt"})),
        ] {
            let decision = decide(&world, mode, false, tool, args);
            let expected = if mode == Mode::ReadOnly && tool == "edit" {
                Action::Deny
            } else {
                Action::Ask
            };
            assert_eq!(
                decision.action, expected,
                "{tool} in {mode:?}: {}",
                decision.explanation
            );
        }
    }
}

#[test]
fn headless_denies_a_hard_linked_read_with_the_headless_message() {
    let world = world();
    let decision = decide(
        &world,
        Mode::Allowlist,
        true,
        "read",
        json!({"file_path": "linked.txt"}),
    );
    assert_eq!(decision.action, Action::Deny);
    assert_eq!(
        decision.message_for_model().as_deref(),
        Some(keel_core::policy::HEADLESS_DENIAL)
    );
    assert!(decision.explanation.to_string().contains("hard links"));
}

#[test]
fn a_deny_rule_still_wins_over_the_hard_link_prompt() {
    let world = world();
    world.write_global_rules(
        "[[permission]]\npermission = \"read\"\npattern = \"linked.txt\"\naction = \"deny\"\n",
    );
    let decision = decide(
        &world,
        Mode::Allowlist,
        false,
        "read",
        json!({"file_path": "linked.txt"}),
    );
    assert_eq!(decision.action, Action::Deny);
}

#[test]
fn the_watchdog_reason_stays_the_headline_and_the_links_are_noted() {
    let world = world();
    std::fs::hard_link(world.outside.join("secret.txt"), world.ws.join("id_rsa")).unwrap();
    let decision = decide(
        &world,
        Mode::Allowlist,
        false,
        "read",
        json!({"file_path": "id_rsa"}),
    );
    assert_eq!(decision.action, Action::Ask);
    let why = decision.explanation.to_string();
    assert!(why.contains("credentials"), "{why}");
    assert!(
        decision
            .explanation
            .notes
            .iter()
            .any(|n| n.contains("hard links")),
        "{:?}",
        decision.explanation.notes
    );
    assert_eq!(decision.hard_links, Some(3));
}

/// A shell command is no read-only read of a hard-linked file either: `cat linked.txt` (or a
/// glob, a symlink, or a recursive search that reaches it) asks, like the read tool.
#[test]
fn shell_reads_of_a_hard_linked_file_are_not_read_only() {
    let world = world();
    for command in [
        "cat linked.txt",
        "head -n1 via_link",
        "cat linked.*",
        "sort linked.txt",
        "grep -r secret .",
        "rg secret",
    ] {
        let decision = decide(
            &world,
            Mode::Allowlist,
            false,
            "bash",
            json!({ "command": command }),
        );
        assert_eq!(
            decision.action,
            Action::Ask,
            "{command}: {}",
            decision.explanation
        );
    }
    let decision = decide(
        &world,
        Mode::Allowlist,
        false,
        "bash",
        json!({"command": "cat README.md"}),
    );
    assert_eq!(decision.action, Action::Allow, "{}", decision.explanation);
}
