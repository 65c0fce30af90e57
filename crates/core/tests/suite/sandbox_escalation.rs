//! "Allow once without the sandbox": `unsandboxed: true` on a shell call is an escalation of its
//! own, decided by the policy apart from the command.

use keel_core::policy::{Action, Answer, Call, Decision, HEADLESS_DENIAL, Mode, Policy, Trust};
use keel_core::runtime::Runtime;
use keel_core::runtime::sandbox::SandboxMode;
use serde_json::{Value, json};

use super::policy_support::{World, spec};

fn decide(policy: &Policy, runtime: &Runtime, args: &Value) -> Decision {
    let spec = spec("bash");
    policy.decide(&Call {
        spec: &spec,
        target: &super::policy_support::target(&spec, args),
        runtime,
    })
}

fn with_mode(runtime: &Runtime, mode: SandboxMode) -> Runtime {
    let mut sandbox = runtime.sandbox().clone();
    sandbox.settings.mode = mode;
    runtime.with_sandbox(sandbox)
}

#[test]
fn allowing_a_command_does_not_lift_the_sandbox() {
    let world = World::new();
    let runtime = world.runtime("wide");
    let policy = world.policy(Mode::Allowlist, false, Trust::Unknown);
    let confined = json!({ "command": "cargo test" });
    let unconfined = json!({ "command": "cargo test", "unsandboxed": true });
    let first = decide(&policy, &runtime, &confined);
    assert!(!first.unconfined);
    policy.remember(&first, Answer::AllowAlways);
    assert_eq!(decide(&policy, &runtime, &confined).action, Action::Allow);

    // The command is allowed for the session; running it unconfined is still asked.
    let asked = decide(&policy, &runtime, &unconfined);
    assert_eq!(asked.action, Action::Ask);
    assert!(asked.unconfined);
    assert!(
        asked
            .explanation
            .to_string()
            .contains("asks to run without the kernel sandbox"),
        "{}",
        asked.explanation
    );
    assert!(
        asked.always_scope.is_some(),
        "rememberable per approval key"
    );
    // Once is once.
    policy.remember(&asked, Answer::AllowOnce);
    assert_eq!(decide(&policy, &runtime, &unconfined).action, Action::Ask);
    // "Always" is remembered for this key only.
    policy.remember(&asked, Answer::AllowAlways);
    let remembered = decide(&policy, &runtime, &unconfined);
    assert_eq!(remembered.action, Action::Allow);
    assert!(remembered.unconfined);
    let other = json!({ "command": "cargo build", "unsandboxed": true });
    assert_eq!(decide(&policy, &runtime, &other).action, Action::Ask);
    // A new session forgets it.
    policy.clear_session();
    assert_eq!(decide(&policy, &runtime, &unconfined).action, Action::Ask);
}

#[test]
fn yolo_still_asks_headless_and_read_only_deny() {
    let world = World::new();
    let runtime = world.runtime("wide");
    let unconfined = json!({ "command": "cargo test", "unsandboxed": true });
    let confined = json!({ "command": "cargo test" });

    let yolo = world.policy(Mode::Yolo, false, Trust::Unknown);
    assert_eq!(decide(&yolo, &runtime, &confined).action, Action::Allow);
    assert_eq!(decide(&yolo, &runtime, &unconfined).action, Action::Ask);

    let headless = world.policy(Mode::Yolo, true, Trust::Unknown);
    let denied = decide(&headless, &runtime, &unconfined);
    assert_eq!(denied.action, Action::Deny);
    assert_eq!(denied.message_for_model().as_deref(), Some(HEADLESS_DENIAL));

    let read_only = world.policy(Mode::ReadOnly, false, Trust::Unknown);
    let denied = decide(
        &read_only,
        &runtime,
        &json!({"command": "ls", "unsandboxed": true}),
    );
    assert_eq!(denied.action, Action::Deny);
    assert!(denied.explanation.to_string().contains("read-only"));
}

#[test]
fn required_refuses_and_off_has_nothing_to_lift() {
    let world = World::new();
    let runtime = world.runtime("wide");
    let policy = world.policy(Mode::Yolo, false, Trust::Unknown);
    let unconfined = json!({ "command": "cargo test", "unsandboxed": true });

    let required = with_mode(&runtime, SandboxMode::Required);
    let denied = decide(&policy, &required, &unconfined);
    assert_eq!(denied.action, Action::Deny);
    assert!(denied.explanation.to_string().contains("required"));

    let off = with_mode(&runtime, SandboxMode::Off);
    let decision = decide(&policy, &off, &unconfined);
    assert_eq!(decision.action, Action::Allow);
    assert!(!decision.unconfined);
}
