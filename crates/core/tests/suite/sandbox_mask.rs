//! The Landlock fallback's credential masks, built once by Keel and handed to the helper as an
//! inherited ruleset (decision 0032): a contained command still cannot read a masked file,
//! whether it existed when the ruleset was built, was created, hard-linked or renamed after;
//! entries that appear later beside masked files stay readable without a rebuild; and the
//! helper applies the ruleset it is handed, which no program it starts inherits.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use keel_core::capability::{RequirementSet, ShellRunRequirement};
use keel_core::runtime::sandbox::mask::MaskRulesets;
use keel_core::runtime::sandbox::mask_server::MaskServer;
use keel_core::runtime::sandbox::profile::{HELPER_BUILD, Mechanism, Profile};
use keel_core::runtime::{Runtime, RuntimeConfig};
use keel_core::tool::{DynTool, Limits, ProgressSink, SessionState, ToolContext, Typed};
use keel_core::tools::bash::BashTool;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const SECRET: &str = "MASKED-7d41a9";

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A session over `root` whose commands run under the fallback, forced, with the policy's
/// credential rules.
fn fallback_runtime(root: &Path, scratch: PathBuf) -> Runtime {
    let mut sandbox = super::tool_support::sandbox_spec();
    sandbox.settings.mechanism = Mechanism::Landlock;
    sandbox.credentials = Some(keel_core::policy::watchdog::credential_rules(None));
    Runtime::new(RuntimeConfig {
        roots: vec![root.to_path_buf()],
        requirements: RequirementSet::fs_read_write(
            &["{workspace}/**", "{session}/**"],
            &["{workspace}/**"],
        )
        .with_shell(ShellRunRequirement::any_args("bash")),
        scratch_dir: scratch,
        sandbox,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

/// Runs `command` as a contained command (nobody approved it) through the bash tool; returns
/// its output, checking it ran under the fallback.
async fn contained(runtime: &Runtime, scratch: &Path, command: &str) -> String {
    let ctx = ToolContext {
        runtime: runtime.contained(command, command),
        session: Arc::new(SessionState::new(
            "s1",
            scratch.to_path_buf(),
            Limits::default(),
            false,
        )),
        call_id: "call-1".into(),
        cancel: CancellationToken::new(),
        progress: ProgressSink::default(),
    };
    let bash: Arc<dyn DynTool> = Typed::wrap(BashTool).unwrap();
    let out = bash
        .execute(json!({ "command": command }), &ctx)
        .await
        .unwrap();
    assert_eq!(out.data["sandbox"], json!("landlock"), "{}", out.text);
    out.text
}

#[tokio::test]
async fn prebuilt_masks_hide_credentials_made_linked_or_renamed_after_they_were_built() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("ws");
    let scratch = base.join("scratch");
    write(&root.join(".env"), &format!("{SECRET}-env\n"));
    write(&root.join("src/lib.rs"), "pub fn plain() {}\n");
    write(&root.join("docs/guide.md"), "guide\n");
    write(
        &root.join("deploy/.ssh/id_ed25519"),
        &format!("{SECRET}-ssh\n"),
    );
    // A name in the workspace for a secret outside it.
    write(&base.join("outside/secret"), &format!("{SECRET}-outside\n"));
    std::fs::hard_link(base.join("outside/secret"), root.join("notes.txt")).unwrap();
    let runtime = fallback_runtime(&root, scratch.clone());

    let first = contained(
        &runtime,
        &scratch,
        "cat .env notes.txt deploy/.ssh/id_ed25519 2>&1; cat src/lib.rs; ls -a",
    )
    .await;
    assert!(!first.contains(SECRET), "{first}");
    assert!(first.contains("pub fn plain()"), "{first}");
    // Masked files keep their names in a listing; only their content is gone.
    assert!(first.contains(".env"), "{first}");
    let stats = runtime.mask_stats();
    assert_eq!(stats.built, 1, "{stats:?}");

    // After the ruleset was built: a credential in a directory it granted whole, a hard link
    // to a masked file, a masked file renamed into another granted directory, and a plain file
    // beside the masked ones.
    write(&root.join("src/.env"), &format!("{SECRET}-new\n"));
    std::fs::hard_link(
        root.join("deploy/.ssh/id_ed25519"),
        root.join("src/key.txt"),
    )
    .unwrap();
    std::fs::rename(root.join(".env"), root.join("docs/.env")).unwrap();
    write(&root.join("CHANGES.md"), "changes\n");
    let second = contained(
        &runtime,
        &scratch,
        "cat src/.env src/key.txt docs/.env 2>&1; cat CHANGES.md docs/guide.md",
    )
    .await;
    assert!(!second.contains(SECRET), "{second}");
    assert!(second.contains("changes\nguide\n"), "{second}");
    // The credential index changed: a new ruleset.
    assert_eq!(runtime.mask_stats().built, 2, "{:?}", runtime.mask_stats());

    // Plain entries beside masked files are granted one by one, without a rebuild; a
    // credential among them stays unreadable (a rebuild follows from the index).
    write(&root.join("NEW.md"), "new at the top\n");
    write(&root.join("fresh/inner.txt"), "inner\n");
    let third = contained(&runtime, &scratch, "cat NEW.md fresh/inner.txt").await;
    assert!(third.contains("new at the top\ninner\n"), "{third}");
    let stats = runtime.mask_stats();
    assert_eq!(stats.built, 2, "{stats:?}");
    assert!(stats.added >= 2, "{stats:?}");
    write(
        &root.join(".env.production"),
        &format!("{SECRET}-production\n"),
    );
    let fourth = contained(&runtime, &scratch, "cat .env.production NEW.md 2>&1").await;
    assert!(!fourth.contains(SECRET), "{fourth}");
    assert!(fourth.contains("new at the top"), "{fourth}");
}

/// A workspace of three files (`listed.txt` and `handed.txt` hold secrets, `plain.txt` not) under
/// `root`, and a fallback profile over it that masks `listed.txt` only: a ruleset handed to the
/// helper that masks `handed.txt` shows it was applied instead of a split around the list.
fn handed_layout(root: &Path) -> Profile {
    let ws = root.join("ws");
    write(&ws.join("listed.txt"), "listed-secret\n");
    write(&ws.join("handed.txt"), "handed-secret\n");
    write(&ws.join("plain.txt"), "plain\n");
    for sub in ["tmp", "stage", "sandbox"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    Profile {
        build: HELPER_BUILD.to_owned(),
        nonce: "n".into(),
        status_file: root.join("status"),
        required: true,
        mechanism: Mechanism::Landlock,
        cwd: ws.clone(),
        writable: Vec::new(),
        readable: vec![ws.clone()],
        protected: Vec::new(),
        pinned: Vec::new(),
        home: None,
        home_readable: Vec::new(),
        home_writable: Vec::new(),
        tmp_dir: root.join("tmp"),
        staging_dir: root.join("stage"),
        network: false,
        proxy: None,
        masked: vec![ws.join("listed.txt")],
        env_allow: vec!["PATH".into()],
        mask_ruleset: None,
        mask_socket: None,
        done_fifo: None,
        keeper: None,
        no_connect: false,
    }
}

/// The helper applies the ruleset it is handed as a layer of its own (here one that masks a
/// file the profile's list does not name, so only the handed ruleset can hide it), and the
/// program does not inherit its descriptor.
#[test]
fn the_helper_applies_the_handed_ruleset_and_closes_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let ws = root.join("ws");
    let mut profile = handed_layout(&root);
    let masks = MaskRulesets::default();
    let fd = masks.ruleset_for(&[ws.join("handed.txt")], None).unwrap();
    profile.mask_ruleset = Some(fd.raw());
    let file = root.join("profile.json");
    std::fs::write(&file, serde_json::to_string(&profile).unwrap()).unwrap();
    let script = format!(
        // Standard error closed for good first: a redirection of the subshell alone would
        // have bash keep a copy of it at 10 or above, which the ruleset's number may be.
        "exec 2>/dev/null; cat handed.txt; cat listed.txt plain.txt; \
         if (exec 200>&{fd}); then echo INHERITED; fi",
        fd = fd.raw()
    );
    let mut command = Command::new(PathBuf::from(env!("CARGO_BIN_EXE_keel-core-sandbox")));
    command
        .args(["run", "--profile"])
        .arg(&file)
        .args(["--", "/bin/bash", "-c", &script]);
    fd.inherit(&mut command);
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(!stdout.contains("handed-secret"), "{stdout}");
    // Not split around the profile's own list: the handed ruleset replaced that.
    assert!(
        stdout.contains("listed-secret\nplain\n"),
        "{stdout}{stderr}"
    );
    assert!(!stdout.contains("INHERITED"), "{stdout}");

    // Without the descriptor, the helper splits its rules around the profile's list itself.
    profile.mask_ruleset = None;
    std::fs::write(&file, serde_json::to_string(&profile).unwrap()).unwrap();
    let output = Command::new(PathBuf::from(env!("CARGO_BIN_EXE_keel-core-sandbox")))
        .args(["run", "--profile"])
        .arg(&file)
        .args([
            "--",
            "/bin/bash",
            "-c",
            "cat listed.txt 2>/dev/null; cat plain.txt",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert_eq!(stdout, "plain\n");
}

/// How many descriptors Keel's mask server answers `key` with (0 or 1).
fn descriptors_for(socket: &Path, key: &str) -> usize {
    use std::io::Write as _;
    use std::os::fd::AsFd as _;
    let mut stream = std::os::unix::net::UnixStream::connect(socket).unwrap();
    stream.write_all(format!("{key}\n").as_bytes()).unwrap();
    let answer = keel_sandbox::fds::recv_with_fds(stream.as_fd(), &mut [0u8; 1], false).unwrap();
    answer.map_or(0, |(_, fds)| fds.len())
}

/// A helper the editor's terminal starts inherits nothing from Keel: it fetches the session's
/// ruleset from Keel's socket with the key in its environment (here a ruleset that masks a file
/// the profile's list does not name, so only the fetched ruleset can hide it, and the rules are
/// not split around the list). The key is taken once, a wrong or withdrawn key gets nothing,
/// and neither the key nor the descriptor reaches the program.
#[test]
fn a_helper_that_inherits_nothing_fetches_the_ruleset_once_with_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let ws = root.join("ws");
    let mut profile = handed_layout(&root);
    let masks = MaskRulesets::default();
    let ruleset = masks.ruleset_for(&[ws.join("handed.txt")], None).unwrap();
    let server = MaskServer::default();
    let (socket, key, _offer) = server
        .offer(&root.join("sandbox"), ruleset.clone())
        .unwrap();
    assert_eq!(
        descriptors_for(&socket, "0123456789abcdef0123456789abcdef"),
        0
    );
    profile.mask_socket = Some(socket.clone());
    let file = root.join("profile.json");
    std::fs::write(&file, serde_json::to_string(&profile).unwrap()).unwrap();
    let script = "cat handed.txt 2>/dev/null; cat listed.txt plain.txt; \
                  env | grep -c KEEL_SANDBOX_MASK_KEY; \
                  exec 2>/dev/null; for n in {3..64}; do (exec 200>&$n) && echo open $n; done; true";
    let output = Command::new(PathBuf::from(env!("CARGO_BIN_EXE_keel-core-sandbox")))
        .args(["run", "--profile"])
        .arg(&file)
        .args(["--", "/bin/bash", "-c", script])
        .env(keel_sandbox::MASK_KEY_ENV, &key)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stdout, "listed-secret\nplain\n0\n", "{stderr}");
    // Taken once.
    assert_eq!(descriptors_for(&socket, &key), 0);

    // An offer is withdrawn when it is dropped; one held is answered.
    let (_, withdrawn, offer) = server
        .offer(&root.join("sandbox"), ruleset.clone())
        .unwrap();
    drop(offer);
    assert_eq!(descriptors_for(&socket, &withdrawn), 0);
    let (_, held, _offer) = server.offer(&root.join("sandbox"), ruleset).unwrap();
    assert_eq!(descriptors_for(&socket, &held), 1);
}

/// The wiring of the editor's terminal: a contained command's invocation for another process to
/// start carries the key in its environment only (not its arguments, not its profile), names the
/// session's socket in its profile, and its helper, started with nothing inherited, takes the
/// offer and keeps the credentials out.
#[tokio::test]
async fn a_terminal_invocation_offers_the_masks_under_a_key_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("ws");
    let scratch = base.join("scratch");
    write(&root.join(".env"), &format!("{SECRET}-env\n"));
    write(&root.join("src/lib.rs"), "pub fn plain() {}\n");
    let runtime = fallback_runtime(&root, scratch);
    let command = "cat .env 2>&1; cat src/lib.rs";
    let contained = runtime.contained(command, command);
    let invocation = contained.shell_invocation(command, &root).unwrap();
    let env_value = |name: &str| {
        invocation
            .env
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
    };
    let key = env_value(keel_sandbox::MASK_KEY_ENV).expect("a key in the environment");
    let profile_text = env_value(keel_sandbox::PROFILE_ENV).expect("the profile");
    assert!(!profile_text.contains(&key));
    assert!(!invocation.args.iter().any(|arg| arg.contains(&key)));
    let profile: Profile = serde_json::from_str(&profile_text).unwrap();
    let socket = profile.mask_socket.expect("the session's socket");
    assert_eq!(profile.mask_ruleset, None);

    let output = Command::new(&invocation.program)
        .args(&invocation.args)
        .envs(invocation.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&root)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(!stdout.contains(SECRET), "{stdout}");
    assert!(stdout.contains("pub fn plain()"), "{stdout}");
    match invocation.confinement() {
        keel_core::runtime::sandbox::Confinement::Confined {
            mechanism, notes, ..
        } => {
            assert_eq!(mechanism, "landlock");
            assert!(
                !notes.iter().any(|note| note.contains("split here")),
                "{notes:?}"
            );
        }
        other => panic!("not confined: {other:?}"),
    }
    // The helper took the offer.
    assert_eq!(descriptors_for(&socket, &key), 0);
}
