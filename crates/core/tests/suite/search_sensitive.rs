//! `grep` and `glob` honour the read rules for the files their walk finds: whatever the call's
//! glob re-includes, a file whose read would be asked (`.env`, keys, hard-linked files) is
//! named but not searched, and one whose read is denied is left out. The gate is the real
//! policy (bundled defaults plus rule files) over a real temporary world.

use std::sync::Arc;

use keel_core::policy::{Mode, PolicySearchGate, Trust};
use keel_core::runtime::Runtime;
use keel_core::tool::{
    DynTool, Limits, ProgressSink, SessionState, Tool, ToolContext, ToolError, ToolOutput, Typed,
};
use keel_core::tools::glob::GlobTool;
use keel_core::tools::grep::GrepTool;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::policy_support::World;

/// Writes each `(path relative to the workspace, text)`, creating its directories.
fn write_files(world: &World, files: &[(&str, &str)]) {
    for (relative, text) in files {
        let path = world.ws.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// The world of the policy tests plus secrets inside the workspace. Every file holds `TOKEN`.
fn world() -> World {
    let world = World::new();
    write_files(
        &world,
        &[
            ("src/config.rs", "const TOKEN: &str = \"public\";\n"),
            ("app/.env.local", "TOKEN=hunter2-local\n"),
            ("deploy/id_rsa", "TOKEN private key\n"),
            ("deploy/server.pem", "TOKEN certificate key\n"),
            ("private/notes.txt", "TOKEN private notes\n"),
        ],
    );
    std::fs::write(world.ws.join(".env"), "TOKEN=hunter2\n").unwrap();
    world
}

fn context(world: &World, runtime: Runtime) -> ToolContext {
    let scratch = world.tmp.join("scratch");
    ToolContext {
        runtime,
        session: Arc::new(SessionState::new("s1", scratch, Limits::default(), false)),
        call_id: "call-1".into(),
        cancel: CancellationToken::new(),
        progress: ProgressSink::default(),
    }
}

/// A tool context whose runtime carries the policy's gate for `tool`, as the engine installs it.
fn gated<T: Tool>(world: &World, tool: &T, headless: bool) -> ToolContext {
    let policy = Arc::new(world.policy(Mode::Allowlist, headless, Trust::Trusted));
    let gate = Arc::new(PolicySearchGate::new(policy, tool.spec()));
    context(
        world,
        world.runtime("workspace-writes").with_search_gate(gate),
    )
}

async fn grep(ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
    let tool: Arc<dyn DynTool> = Typed::wrap(GrepTool).unwrap();
    tool.execute(args, ctx).await
}

async fn glob(ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
    let tool: Arc<dyn DynTool> = Typed::wrap(GlobTool).unwrap();
    tool.execute(args, ctx).await
}

const SECRETS: &[&str] = &[
    "hunter2",
    "private key",
    "certificate key",
    "outside secret",
];

fn assert_no_secret(text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{secret:?} leaked:\n{text}");
    }
}

/// Without the gate the attack is real: a glob that names hidden files re-includes `.env`.
#[tokio::test]
async fn without_the_gate_a_glob_re_includes_env_files() {
    let world = world();
    let ctx = context(&world, world.runtime("workspace-writes"));
    let out = grep(
        &ctx,
        json!({"pattern": "TOKEN", "glob": "**/.env*", "output_mode": "content"}),
    )
    .await
    .unwrap();
    assert!(out.text.contains("hunter2"), "{}", out.text);
}

#[tokio::test]
async fn grep_does_not_read_env_files_or_keys_whatever_its_glob_re_includes() {
    let world = world();
    let ctx = gated(&world, &GrepTool, false);
    for glob in [
        "**/.env*",
        ".env",
        "**/*",
        "**",
        "*",
        "{.env,app/.env.local}",
        "**/id_rsa",
        "**/*.pem",
        "!src/**",
    ] {
        for mode in ["content", "files_with_matches", "count"] {
            let out = grep(
                &ctx,
                json!({"pattern": "TOKEN", "glob": glob, "output_mode": mode, "-C": 3}),
            )
            .await
            .unwrap();
            assert_no_secret(&out.text);
            if mode != "content" {
                for listed in out.text.lines().filter(|l| !l.starts_with('[')) {
                    assert!(
                        !listed.contains(".env")
                            && !listed.contains("id_rsa")
                            && !listed.contains(".pem"),
                        "glob {glob:?}, mode {mode}: a secret file matched: {listed}"
                    );
                }
            }
        }
    }
    // The default search (no glob) still finds the ordinary file, and says what it skipped.
    let out = grep(
        &ctx,
        json!({"pattern": "hunter2|TOKEN", "glob": "**/.env*", "output_mode": "content"}),
    )
    .await
    .unwrap();
    assert!(out.text.contains("not searched"), "{}", out.text);
    assert!(out.text.contains(".env"), "{}", out.text);
    assert_eq!(out.data["not_searched"], 2, "{}", out.text);
    let out = grep(&ctx, json!({"pattern": "TOKEN", "output_mode": "content"}))
        .await
        .unwrap();
    assert!(out.text.contains("src/config.rs:1:"), "{}", out.text);
    assert!(out.text.contains("deploy/id_rsa"), "named: {}", out.text);
    assert_no_secret(&out.text);
}

#[tokio::test]
async fn grep_on_a_path_the_call_names_was_decided_with_the_call() {
    // The engine asks before a grep whose `path` is `.env`; once it runs, the file is searched.
    let world = world();
    let ctx = gated(&world, &GrepTool, false);
    let out = grep(
        &ctx,
        json!({"pattern": "TOKEN", "path": ".env", "output_mode": "content"}),
    )
    .await
    .unwrap();
    assert!(out.text.contains("hunter2"), "{}", out.text);
    // A directory the call names is not a licence for the secrets below it.
    let out = grep(
        &ctx,
        json!({"pattern": "TOKEN", "path": "app", "output_mode": "content", "glob": "*"}),
    )
    .await
    .unwrap();
    assert_no_secret(&out.text);
}

#[tokio::test]
async fn user_rules_decide_too_deny_hides_and_ask_withholds() {
    let world = world();
    world.write_global_rules(
        "[[permission]]\npermission = \"fs.read\"\nprefix = \"private\"\naction = \"deny\"\n\n\
         [[permission]]\npermission = \"grep\"\npattern = \"src/**\"\naction = \"ask\"\n",
    );
    let ctx = gated(&world, &GrepTool, false);
    let out = grep(&ctx, json!({"pattern": "TOKEN", "output_mode": "content"}))
        .await
        .unwrap();
    assert!(!out.text.contains("private notes"), "{}", out.text);
    assert!(
        !out.text.contains("private/notes.txt"),
        "denied: not even named"
    );
    assert!(!out.text.contains("src/config.rs:1:"), "{}", out.text);
    assert!(out.text.contains("src/config.rs"), "asked: named");

    let ctx = gated(&world, &GlobTool, false);
    let out = glob(&ctx, json!({"pattern": "**/*"})).await.unwrap();
    assert!(!out.text.contains("private/notes.txt"), "{}", out.text);
    assert!(out.text.contains("deploy/id_rsa"), "{}", out.text);
}

#[tokio::test]
async fn headless_grep_withholds_what_it_would_have_asked() {
    let world = world();
    let ctx = gated(&world, &GrepTool, true);
    let out = grep(
        &ctx,
        json!({"pattern": "TOKEN", "glob": "**/.env*", "output_mode": "content"}),
    )
    .await
    .unwrap();
    assert_no_secret(&out.text);
    assert!(out.text.contains("not searched"), "{}", out.text);
}

#[tokio::test]
async fn grep_does_not_read_hard_linked_files_it_finds() {
    let world = world();
    std::fs::hard_link(
        world.outside.join("secret.txt"),
        world.ws.join("src/linked.txt"),
    )
    .unwrap();
    std::fs::write(world.outside.join("secret.txt"), "TOKEN outside secret\n").unwrap();
    let ctx = gated(&world, &GrepTool, false);
    let out = grep(&ctx, json!({"pattern": "TOKEN", "output_mode": "content"}))
        .await
        .unwrap();
    assert_no_secret(&out.text);
    assert!(out.text.contains("src/linked.txt"), "{}", out.text);
    // Even without a gate, the runtime refuses to open it for the search.
    let ctx = context(&world, world.runtime("workspace-writes"));
    let out = grep(&ctx, json!({"pattern": "TOKEN", "output_mode": "content"}))
        .await
        .unwrap();
    assert!(!out.text.contains("outside secret"), "{}", out.text);
}

#[tokio::test]
async fn glob_lists_names_of_files_that_ask_but_never_content() {
    // Listing a name is not reading the file: glob shows `.env` when its pattern names it.
    let world = world();
    let ctx = gated(&world, &GlobTool, false);
    let out = glob(&ctx, json!({"pattern": "**/*.pem"})).await.unwrap();
    assert_eq!(out.text.trim(), "deploy/server.pem");
}

/// red2: credential files under names beyond `.env` and `id_*` (a cloud key file, `.envrc`, a
/// key store, a copied `.ssh` or `.docker` directory) are named, never searched, even in yolo.
#[tokio::test]
async fn grep_does_not_read_credential_files_under_other_names_even_in_yolo() {
    let world = world();
    write_files(
        &world,
        &[
            ("deploy/credentials.json", "TOKEN hunter2-gcp\n"),
            ("deploy/service-account-prod.json", "TOKEN hunter2-sa\n"),
            (".envrc", "export TOKEN=hunter2-direnv\n"),
            ("certs/signing.p12", "TOKEN hunter2-p12\n"),
            ("ops/.ssh/deploy", "TOKEN hunter2-ssh\n"),
            ("backup/.docker/config.json", "TOKEN hunter2-docker\n"),
        ],
    );
    let policy = Arc::new(world.policy(Mode::Yolo, false, Trust::Trusted));
    let gate = Arc::new(PolicySearchGate::new(policy, GrepTool.spec()));
    let ctx = context(
        &world,
        world.runtime("workspace-writes").with_search_gate(gate),
    );
    for glob in ["**/*", "**/*.json", "**/.envrc", "**/.ssh/*", "**/*.p12"] {
        let out = grep(
            &ctx,
            json!({"pattern": "TOKEN", "glob": glob, "output_mode": "content"}),
        )
        .await
        .unwrap();
        assert!(
            !out.text.contains("hunter2"),
            "glob {glob:?} leaked:\n{}",
            out.text
        );
    }
    let out = grep(&ctx, json!({"pattern": "TOKEN", "output_mode": "content"}))
        .await
        .unwrap();
    assert!(out.text.contains("src/config.rs:1:"), "{}", out.text);
    assert!(out.text.contains("not searched"), "{}", out.text);
}
