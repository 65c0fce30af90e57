//! The engine's public surface: trust store, persistence, loading errors, reports, and the
//! documentation's tables kept in sync with the code.

use std::path::Path;
use std::sync::Arc;

use keel_core::policy::grammar::Grammars;
use keel_core::policy::layers::bundled_rules;
use keel_core::policy::{
    Action, Answer, Call, HEADLESS_DENIAL, Layer, Mode, Policy, PolicyError, Trust, TrustStore,
    render_check, render_rules,
};
use serde_json::json;

use super::policy_support::{World, spec};

fn decide(
    policy: &Policy,
    world: &World,
    tool: &str,
    args: serde_json::Value,
) -> keel_core::policy::Decision {
    let runtime = world.runtime("wide");
    let spec = spec(tool);
    policy.decide(&Call {
        spec: &spec,
        target: &super::policy_support::target(&spec, &args),
        runtime: &runtime,
    })
}

#[test]
fn the_policy_is_send_and_sync_and_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Policy>();
    let world = World::new();
    let policy = Arc::new(world.policy(Mode::Allowlist, false, Trust::Unknown));
    let runtime = world.runtime("wide");
    std::thread::scope(|scope| {
        for i in 0..4 {
            let policy = Arc::clone(&policy);
            let runtime = runtime.clone();
            scope.spawn(move || {
                let spec = spec("bash");
                let args = json!({ "command": format!("cargo test -p crate{i}") });
                let decision = policy.decide(&Call {
                    spec: &spec,
                    target: &super::policy_support::target(&spec, &args),
                    runtime: &runtime,
                });
                policy.remember(&decision, Answer::AllowAlways);
            });
        }
    });
    assert_eq!(
        policy.session_rules().len(),
        1,
        "one key, `cargo test`, remembered once"
    );
}

#[test]
fn mode_and_trust_change_at_run_time() {
    let world = World::new();
    world.write_project_rules(
        "[[permission]]\npermission = \"bash\"\nprefix = \"cargo test\"\naction = \"allow\"\n",
    );
    let policy = world.policy(Mode::Allowlist, false, Trust::Unknown);
    let args = json!({ "command": "cargo test" });
    assert_eq!(
        decide(&policy, &world, "bash", args.clone()).action,
        Action::Ask
    );
    policy.set_trust(Trust::Trusted);
    assert_eq!(
        decide(&policy, &world, "bash", args.clone()).action,
        Action::Allow
    );
    policy.set_mode(Mode::ReadOnly);
    assert_eq!(policy.mode(), Mode::ReadOnly);
    assert_eq!(decide(&policy, &world, "bash", args).action, Action::Deny);
}

#[test]
fn the_trust_store_records_canonical_paths() {
    let world = World::new();
    let store = TrustStore::new(world.tmp.join("data/trusted.toml"));
    assert!(!store.is_trusted(&world.ws).unwrap());
    assert_eq!(store.trust_of(&world.ws).unwrap(), Trust::Unknown);
    // Trusting through a symlink records the real path.
    std::os::unix::fs::symlink(&world.ws, world.tmp.join("ws-link")).unwrap();
    store.trust(&world.tmp.join("ws-link")).unwrap();
    store.trust(&world.ws).unwrap();
    assert!(store.is_trusted(&world.ws).unwrap());
    assert_eq!(store.trust_of(&world.ws).unwrap(), Trust::Trusted);
    let text = std::fs::read_to_string(store.path()).unwrap();
    assert_eq!(
        text.matches(&world.ws.display().to_string()).count(),
        1,
        "{text}"
    );
    assert!(text.starts_with("# Workspaces whose project settings"));
    assert!(!store.is_trusted(&world.outside).unwrap());
    store.revoke(&world.ws).unwrap();
    assert!(!store.is_trusted(&world.ws).unwrap());

    std::fs::write(store.path(), "trusted = 3\n").unwrap();
    let err = store.is_trusted(&world.ws).unwrap_err().to_string();
    assert!(err.contains("trusted.toml"), "{err}");
}

#[test]
fn persisting_appends_readable_rules_without_clobbering() {
    let world = World::new();
    let existing = "# my rules\n[[permission]]\npermission = \"bash\"\nprefix = \"make\"\naction = \"allow\"\n";
    world.write_project_rules(existing);
    let policy = world.policy(Mode::Allowlist, false, Trust::Trusted);
    let decision = decide(
        &policy,
        &world,
        "bash",
        json!({ "command": "cargo test -p core && npm publish" }),
    );
    assert_eq!(decision.action, Action::Ask);
    policy.remember(&decision, Answer::AllowAlways);
    let path = policy.persist_to_project(&decision, &world.ws).unwrap();
    assert_eq!(path, world.ws.join(".keel/permissions.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with(existing), "{text}");
    assert!(text.contains("prefix = \"cargo test\""), "{text}");
    assert!(text.contains("prefix = \"npm publish\""), "{text}");
    assert!(
        text.contains(
            "reason = \"saved from a session answer: commands starting with `cargo test`\""
        ),
        "{text}"
    );

    // A later session of the trusted project allows what was saved.
    let later = world.policy(Mode::Allowlist, false, Trust::Trusted);
    let decision = decide(
        &later,
        &world,
        "bash",
        json!({ "command": "cargo test --release" }),
    );
    assert_eq!(
        decision.action,
        Action::Allow,
        "{}",
        render_check(&decision)
    );
    assert!(render_check(&decision).contains("project rule `bash` prefix `cargo test`"));

    // "Reject always" is saved as a deny.
    let decision = decide(
        &later,
        &world,
        "bash",
        json!({ "command": "docker push registry/app" }),
    );
    later.remember(&decision, Answer::RejectAlways);
    later.persist_to_project(&decision, &world.ws).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("prefix = \"docker push\"\naction = \"deny\""),
        "{text}"
    );
    let decision = decide(
        &later,
        &world,
        "bash",
        json!({ "command": "docker push other/app" }),
    );
    assert_eq!(decision.action, Action::Deny);
}

#[test]
fn persisting_refuses_what_has_no_key_and_keeps_a_broken_file() {
    let world = World::new();
    let policy = world.policy(Mode::Allowlist, false, Trust::Trusted);
    let decision = decide(
        &policy,
        &world,
        "bash",
        json!({ "command": "echo $(date)" }),
    );
    let err = policy.persist_to_project(&decision, &world.ws).unwrap_err();
    assert!(matches!(err, PolicyError::NotCacheable(_)), "{err}");

    let broken = "[[permission]]\npermission = \"bash\"\naction = \"alow\"\n";
    world.write_project_rules(broken);
    let decision = decide(&policy, &world, "bash", json!({ "command": "cargo test" }));
    assert!(policy.persist_to_project(&decision, &world.ws).is_err());
    let text = std::fs::read_to_string(world.ws.join(".keel/permissions.toml")).unwrap();
    assert_eq!(text, broken);
}

#[test]
fn persisting_creates_the_project_file() {
    let world = World::new();
    std::fs::remove_dir(world.ws.join(".keel")).unwrap();
    let policy = world.policy(Mode::Allowlist, false, Trust::Trusted);
    let decision = decide(
        &policy,
        &world,
        "write",
        json!({ "file_path": "src/[gen]/a.rs" }),
    );
    assert_eq!(
        decision.always_scope.as_deref(),
        Some("edits to `src/[gen]/**`")
    );
    policy.remember(&decision, Answer::AllowAlways);
    // The directory glob escapes the brackets: it covers `src/[gen]/` only.
    assert_eq!(
        decide(
            &policy,
            &world,
            "write",
            json!({ "file_path": "src/[gen]/b.rs" })
        )
        .action,
        Action::Allow
    );
    assert_eq!(
        decide(
            &policy,
            &world,
            "write",
            json!({ "file_path": "src/g/b.rs" })
        )
        .action,
        Action::Ask
    );
    let path = policy.persist_to_project(&decision, &world.ws).unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    assert!(
        text.contains("pattern = 'src/\\[gen\\]/**'")
            || text.contains("pattern = \"src/\\\\[gen\\\\]/**\""),
        "{text}"
    );
}

#[test]
fn invalid_rule_files_are_errors_naming_the_file() {
    let world = World::new();
    world.write_project_rules(
        "[[permission]]\npermission = \"bash\"\nprefix = \"ls\"\naction = \"alow\"\n",
    );
    let err = Policy::load(
        &world.ws,
        Some(&world.global),
        Mode::Allowlist,
        false,
        Trust::Trusted,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(".keel/permissions.toml, rule #1: unknown action `alow`"),
        "{err}"
    );
    assert!(err.contains("Fix: did you mean \"allow\"?"), "{err}");

    let world = World::new();
    world.write_global_rules("[[permision]]\npermission = \"bash\"\n");
    let err = Policy::load(
        &world.ws,
        Some(&world.global),
        Mode::Allowlist,
        false,
        Trust::Trusted,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("keel/permissions.toml"), "{err}");
    assert!(err.contains("permision"), "{err}");
}

#[test]
fn rules_are_listed_by_scope() {
    let world = World::new();
    world.write_project_rules(
        "[[permission]]\npermission = \"bash\"\nprefix = \"cargo test\"\naction = \"allow\"\n",
    );
    let policy = world.policy(Mode::Allowlist, false, Trust::Untrusted);
    let decision = decide(
        &policy,
        &world,
        "web_fetch",
        json!({ "url": "https://docs.rs/x" }),
    );
    policy.remember(&decision, Answer::AllowAlways);
    let layers = policy.rules_by_layer();
    let order: Vec<Layer> = layers.iter().map(|l| l.layer).collect();
    assert_eq!(order, vec![Layer::Session, Layer::Project, Layer::Manifest]);
    assert_eq!(layers[0].rules.len(), 1);
    assert!(layers[1].rules[0].ignored);
    assert!(layers[2].rules.iter().all(|r| !r.ignored));

    let text = render_rules(&policy).replace(&world.tmp.display().to_string(), "[TMP]");
    insta::assert_snapshot!(text);
}

#[test]
fn the_check_report_names_rule_scope_and_file() {
    let world = World::new();
    let policy = world.policy(Mode::Allowlist, true, Trust::Unknown);
    let decision = decide(
        &policy,
        &world,
        "bash",
        json!({ "command": "git status && cargo build" }),
    );
    let text = render_check(&decision);
    insta::assert_snapshot!(text);
    assert_eq!(
        decision.message_for_model().as_deref(),
        Some(HEADLESS_DENIAL)
    );
    assert!(HEADLESS_DENIAL.starts_with("Denied: this action needs the user's approval"));
}

#[test]
fn answers_parse() {
    assert_eq!(
        "allow-always".parse::<Answer>().unwrap(),
        Answer::AllowAlways
    );
    assert_eq!("reject-once".parse::<Answer>().unwrap(), Answer::RejectOnce);
    assert!("always".parse::<Answer>().is_err());
}

fn table_block<'a>(doc: &'a str, name: &str) -> &'a str {
    let start = format!("<!-- {name}:start -->");
    let end = format!("<!-- {name}:end -->");
    let from = doc
        .find(&start)
        .map(|i| i + start.len())
        .expect("start marker");
    let to = doc.find(&end).expect("end marker");
    doc[from..to].trim()
}

/// docs/permissions.md's tables must match the bundled rules and the read-only class; the
/// failure message prints the table to paste.
#[test]
fn the_documentation_tables_match_the_code() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/permissions.md"),
    )
    .unwrap();
    let mut rules =
        String::from("| permission | pattern | action | why |\n| --- | --- | --- | --- |\n");
    for rule in bundled_rules().unwrap().rules {
        rules.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            rule.permission,
            rule.pattern,
            rule.action,
            rule.reason.unwrap_or_default()
        ));
    }
    assert_eq!(
        table_block(&doc, "bundled-rules"),
        rules.trim(),
        "expected:\n{rules}"
    );
    let mut commands = String::from("| command | stays read-only |\n| --- | --- |\n");
    for grammar in Grammars::bundled().iter() {
        commands.push_str(&format!("| `{}` | {} |\n", grammar.name, grammar.summary));
    }
    assert_eq!(
        table_block(&doc, "read-only-commands"),
        commands.trim(),
        "expected:\n{commands}"
    );
}

/// Every rule-file snippet in docs/permissions.md loads (patterns compile, examples match).
#[test]
fn the_documentation_examples_load() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/permissions.md"),
    )
    .unwrap();
    let mut checked = 0;
    for block in doc.split("```toml\n").skip(1) {
        let text = block.split("```").next().unwrap();
        if !text.contains("[[permission]]") {
            continue;
        }
        keel_core::policy::RuleSet::parse(text, keel_core::policy::RuleSource::Bundled)
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        checked += 1;
    }
    assert!(checked >= 5, "{checked} snippets");
}

/// A `.git` file is project content: one that names a repository outside the workspace would
/// let `git log -p` print another repository's files. Only a linked worktree whose
/// administrative directory names this `.git` file back (what `git worktree add` writes) is
/// read without a prompt.
#[test]
fn a_dot_git_file_naming_a_foreign_repository_asks() {
    let world = World::new();
    std::fs::remove_dir_all(world.ws.join(".git")).unwrap();
    world.write_file("outside/repo/.git/HEAD", "ref: refs/heads/main\n");
    world.write_file("outside/repo/.git/config", "[core]\n\tbare = false\n");
    world.make_dir("outside/repo/.git/objects");
    world.make_dir("outside/repo/.git/refs");
    world.write_file("ws/.git", "gitdir: {outside}/repo/.git\n");
    let policy = world.policy(Mode::Allowlist, false, Trust::Unknown);
    let args = json!({"command": "git log -p"});
    let decision = decide(&policy, &world, "bash", args.clone());
    assert_eq!(decision.action, Action::Ask, "{}", render_check(&decision));

    // The same layout written by `git worktree add`: the back-link makes it the workspace's.
    world.write_file(
        "outside/repo/.git/worktrees/ws/HEAD",
        "ref: refs/heads/main\n",
    );
    world.write_file("outside/repo/.git/worktrees/ws/commondir", "../..\n");
    world.write_file("outside/repo/.git/worktrees/ws/gitdir", "{ws}/.git\n");
    world.write_file("ws/.git", "gitdir: {outside}/repo/.git/worktrees/ws\n");
    let decision = decide(&policy, &world, "bash", args.clone());
    assert_eq!(
        decision.action,
        Action::Allow,
        "{}",
        render_check(&decision)
    );

    // A back-link to somewhere else is not this worktree's.
    world.write_file("outside/repo/.git/worktrees/ws/gitdir", "{outside}/.git\n");
    let decision = decide(&policy, &world, "bash", args);
    assert_eq!(decision.action, Action::Ask, "{}", render_check(&decision));
}

/// A credential file the repository tracks is printed by a patch (`git log -p`, `git show`,
/// `git diff --cached`) or a blob (`git cat-file -p`) as surely as by `git show HEAD:.env`:
/// those calls are not read-only while the index tracks one. Calls that print no contents
/// (`git log --oneline`, `git show -s`) and blobs by a harmless name stay read-only.
#[test]
fn git_patches_of_a_tracked_credential_ask() {
    let world = World::new();
    std::fs::remove_dir_all(world.ws.join(".git")).unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(&world.ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &world.home)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    git(&["init", "-q", "."]);
    git(&["add", "README.md", "src/main.rs"]);
    git(&["commit", "-qm", "code"]);
    let policy = world.policy(Mode::Allowlist, false, Trust::Unknown);
    let action = |command: &str| {
        let decision = decide(&policy, &world, "bash", json!({ "command": command }));
        (decision.action, render_check(&decision))
    };
    // The untracked .env is not in any patch.
    for command in ["git log -p", "git show", "git diff --cached"] {
        let (got, report) = action(command);
        assert_eq!(got, Action::Allow, "{command}: {report}");
    }
    git(&["add", ".env"]);
    git(&["commit", "-qm", "oops"]);
    let blob = git(&["rev-parse", "HEAD:.env"]);
    for command in [
        "git log -p".to_owned(),
        "git log -1 --patch".to_owned(),
        "git show".to_owned(),
        "git show HEAD".to_owned(),
        "git diff --cached HEAD~1".to_owned(),
        "git whatchanged -p".to_owned(),
        format!("git cat-file -p {}", blob.trim()),
    ] {
        let (got, report) = action(&command);
        assert_eq!(got, Action::Ask, "{command}: {report}");
    }
    for command in [
        "git log --oneline",
        "git show -s --format=%H",
        "git show HEAD:src/main.rs",
        "git status",
    ] {
        let (got, report) = action(command);
        assert_eq!(got, Action::Allow, "{command}: {report}");
    }
}

/// A subagent's policy reads its session's as it is at each decision: a "reject always" and a
/// mode change given after the child was made reach it, the stricter mode applies, and an
/// agent's own stricter mode stays.
#[test]
fn a_child_policy_follows_its_sessions_live_answers_and_mode() {
    let world = World::new();
    let session = Arc::new(world.policy(Mode::Allowlist, false, Trust::Trusted));
    let child = session.child(None);
    let push = json!({ "command": "docker push registry/app" });
    assert_eq!(
        decide(&child, &world, "bash", push.clone()).action,
        Action::Ask
    );
    // The user rejects the command for good in the session, after the child started.
    let decision = decide(&session, &world, "bash", push.clone());
    session.remember(&decision, Answer::RejectAlways);
    let decision = decide(&child, &world, "bash", push.clone());
    assert_eq!(decision.action, Action::Deny, "{}", render_check(&decision));
    // A looser session mode later never loosens an agent's stricter mode; a stricter one
    // reaches every child.
    let read_only_agent = session.child(Some(Mode::ReadOnly));
    session.set_mode(Mode::Yolo);
    assert_eq!(read_only_agent.mode(), Mode::ReadOnly);
    assert_eq!(child.mode(), Mode::Yolo);
    session.set_mode(Mode::ReadOnly);
    assert_eq!(child.mode(), Mode::ReadOnly);
    let write = decide(
        &child,
        &world,
        "bash",
        json!({ "command": "touch made.txt" }),
    );
    assert_eq!(write.action, Action::Deny, "{}", render_check(&write));
}

/// The code spans of a Markdown text (CommonMark: a run of n backticks opens one, the next run
/// of exactly n closes it, one space is stripped from each end when both are there) and the
/// text outside them. An opening run without its closer stays text, as in CommonMark.
fn code_spans(markdown: &str) -> (Vec<String>, String) {
    let chars: Vec<char> = markdown.chars().collect();
    let run_at = |i: usize| chars[i..].iter().take_while(|&&c| c == '`').count();
    let (mut spans, mut outside, mut i) = (Vec::new(), String::new(), 0);
    while i < chars.len() {
        if chars[i] != '`' {
            outside.push(chars[i]);
            i += 1;
            continue;
        }
        let open = run_at(i);
        let mut j = i + open;
        let close = loop {
            if j >= chars.len() {
                break None;
            }
            if chars[j] == '`' {
                let run = run_at(j);
                if run == open {
                    break Some(j);
                }
                j += run;
            } else {
                j += 1;
            }
        };
        match close {
            Some(end) => {
                let mut inner: String = chars[i + open..end].iter().collect();
                if inner.len() >= 2
                    && inner.starts_with(' ')
                    && inner.ends_with(' ')
                    && !inner.trim().is_empty()
                {
                    inner = inner[1..inner.len() - 1].to_owned();
                }
                spans.push(inner);
                i = end + open;
            }
            None => {
                outside.extend(&chars[i..i + open]);
                i += open;
            }
        }
    }
    (spans, outside)
}

/// The watchdog's reason for a call: its spans and the text outside them, asserted to hold
/// nothing of the hostile `name` outside the spans.
fn watchdog_spans(decision: &keel_core::policy::Decision, name: &str) -> Vec<String> {
    let keel_core::policy::Cause::Watchdog { reason, .. } = &decision.explanation.cause else {
        panic!("the watchdog decides: {}", render_check(decision));
    };
    let (spans, outside) = code_spans(reason);
    for piece in ["`", "\n", "\u{202e}", "**", "Keel checked", "txt."] {
        assert!(
            !outside.contains(piece),
            "{piece:?} of the name {name:?} is outside the code spans: {reason:?}"
        );
    }
    assert!(
        !reason.contains(['\n', '\u{202e}']),
        "no raw line break or bidi control: {reason:?}"
    );
    spans
}

/// A file name from a hostile repository or model (backticks, a newline, Markdown of its own, a
/// bidi override) reaches the watchdog's reasons only inside code spans, escaped: the permission
/// card cannot be made to say what Keel did not say.
#[test]
fn a_hostile_file_name_stays_inside_the_code_spans_of_the_watchdog_reason() {
    use keel_core::tool::view::escaped;

    let world = World::new();
    let policy = world.policy(Mode::Allowlist, false, Trust::Trusted);
    // A shell command deleting a real file outside the workspace (the shell's own check refuses
    // bidi controls in a command before the watchdog, so this name has none).
    let name = "a`\n**Keel checked: safe** `txt.";
    let file = world.outside.join(name);
    std::fs::write(&file, "data\n").unwrap();
    let path = file.to_str().unwrap();
    let command = format!("rm -f '{path}'");
    let decision = decide(&policy, &world, "bash", json!({ "command": command }));
    let spans = watchdog_spans(&decision, name);
    assert_eq!(
        spans,
        vec![escaped(&format!("rm -f {path}")), escaped(path)],
        "the command (as its words read) and the path, each one code span, escaped"
    );
    assert!(file.exists(), "deciding touches nothing");

    // A glob the watchdog expands over real files, one with a bidi override in its name.
    let name = "c`\n**Keel checked: safe** \u{202e}`txt.";
    std::fs::write(world.outside.join(name), "data\n").unwrap();
    let glob = format!("rm -f {}/c*", world.outside.display());
    let decision = decide(&policy, &world, "bash", json!({ "command": glob }));
    let path = world.outside.join(name);
    let path = path.to_str().unwrap();
    let spans = watchdog_spans(&decision, name);
    assert_eq!(
        spans,
        vec![escaped(&format!("rm -f {path}")), escaped(path)],
        "the expanded command and path, each one code span, escaped"
    );
    assert!(spans[1].ends_with("/c`\\n**Keel checked: safe** \\u{202e}`txt."));

    // A file tool writing a real git hook of a hostile name.
    let name = "e`\n**Keel checked: safe** `txt.";
    let hook = world.ws.join(".git/hooks").join(name);
    std::fs::write(&hook, "#!/bin/sh\n").unwrap();
    let path = hook.to_str().unwrap();
    let decision = decide(&policy, &world, "write", json!({ "file_path": path }));
    let spans = watchdog_spans(&decision, name);
    assert_eq!(
        spans,
        vec![escaped(path)],
        "the path, one code span, escaped"
    );
}
