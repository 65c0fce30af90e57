//! The paths a search finally reaches, decided as a read of the same path would be: names the
//! policy's text cannot spell (not UTF-8), paths too long to be opened by name, a home
//! directory reached through a symlink. Real files, the real tools, the real policy.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::sync::Arc;

use keel_core::policy::{Mode, PolicySearchGate, Trust};
use keel_core::tool::{
    DynTool, Limits, ProgressSink, SessionState, Tool, ToolContext, ToolSpec, Typed,
};
use keel_core::tools::glob::GlobTool;
use keel_core::tools::grep::GrepTool;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::policy_support::World;

/// A context whose runtime carries the policy's gate for `tool`, as the engine installs it.
fn gated(world: &World, tool: ToolSpec, headless: bool) -> ToolContext {
    let policy = Arc::new(world.policy(Mode::Allowlist, headless, Trust::Trusted));
    let gate = Arc::new(PolicySearchGate::new(policy, tool));
    ToolContext {
        runtime: world.runtime("workspace-writes").with_search_gate(gate),
        session: Arc::new(SessionState::new(
            "s1",
            world.tmp.join("scratch"),
            Limits::default(),
            false,
        )),
        call_id: "call-1".into(),
        cancel: CancellationToken::new(),
        progress: ProgressSink::default(),
    }
}

async fn call<T: Tool>(tool: T, ctx: &ToolContext, args: Value) -> String {
    let tool: Arc<dyn DynTool> = Typed::wrap(tool).unwrap();
    tool.execute(args, ctx).await.unwrap().text
}

/// A name that is not UTF-8 (a Latin-1 `é`), as old archives and other systems leave them.
fn latin1(prefix: &str) -> std::path::PathBuf {
    let mut bytes = prefix.as_bytes().to_vec();
    bytes.extend_from_slice(b"caf\xe9.txt");
    std::path::PathBuf::from(OsStr::from_bytes(&bytes))
}

/// A file whose read a `deny` rule refuses is left out of every search, named or not: a name
/// the policy's text cannot spell (not UTF-8) is decided on its readable spelling, not shown
/// because it cannot be decided.
#[tokio::test]
async fn a_name_that_is_not_utf8_in_a_denied_directory_is_not_listed() {
    let world = World::new();
    world.write_global_rules(
        "[[permission]]\npermission = \"fs.read\"\nprefix = \"private\"\naction = \"deny\"\n",
    );
    std::fs::create_dir_all(world.ws.join("private")).unwrap();
    std::fs::create_dir_all(world.ws.join("src")).unwrap();
    std::fs::write(world.ws.join(latin1("private/")), "TOKEN private\n").unwrap();
    std::fs::write(world.ws.join("private/plain.txt"), "TOKEN private\n").unwrap();
    std::fs::write(world.ws.join(latin1("src/")), "TOKEN public\n").unwrap();

    let ctx = gated(&world, GlobTool.spec(), false);
    let listed = call(GlobTool, &ctx, json!({"pattern": "**/*.txt"})).await;
    assert!(!listed.contains("private"), "{listed}");
    // Outside the denied directory the name is still listed (its read would be asked: the
    // read tool cannot name it).
    assert!(listed.contains("src/caf"), "{listed}");

    let ctx = gated(&world, GrepTool.spec(), false);
    let found = call(
        GrepTool,
        &ctx,
        json!({"pattern": "TOKEN", "output_mode": "content"}),
    )
    .await;
    assert!(!found.contains("private"), "{found}");
    assert!(found.contains("src/caf"), "named in the note: {found}");
    assert!(!found.contains("TOKEN public"), "not searched: {found}");
}

/// Creates `depth` nested directories named `name` below `dir` (by descriptor: the path soon
/// outgrows what the kernel resolves by name) and writes `file` in the deepest with `text`.
/// Returns the deepest directory's path.
fn deep_file(
    dir: &std::path::Path,
    name: &str,
    depth: usize,
    file: &str,
    text: &str,
) -> std::path::PathBuf {
    use nix::fcntl::{OFlag, openat};
    use nix::sys::stat::{Mode, mkdirat};
    use std::io::Write as _;
    let mut fd =
        nix::fcntl::open(dir, OFlag::O_DIRECTORY | OFlag::O_RDONLY, Mode::empty()).unwrap();
    let mut path = dir.to_path_buf();
    for _ in 0..depth {
        mkdirat(&fd, name, Mode::from_bits_truncate(0o755)).unwrap();
        fd = openat(
            &fd,
            name,
            OFlag::O_DIRECTORY | OFlag::O_RDONLY,
            Mode::empty(),
        )
        .unwrap();
        path.push(name);
    }
    let out = openat(
        &fd,
        file,
        OFlag::O_CREAT | OFlag::O_WRONLY,
        Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    std::fs::File::from(out).write_all(text.as_bytes()).unwrap();
    path
}

/// A git configuration counts as a credential when it holds one; one whose text cannot be
/// looked at counts as holding one. A search reads files through its directories' descriptors,
/// so it reaches files whose path is too long to open by name: the look at such a file's text
/// must not take "cannot open it by name" for "there is nothing there".
#[tokio::test]
async fn a_git_configuration_too_deep_to_open_by_name_counts_as_a_credential() {
    let world = World::new();
    let config = "[remote \"origin\"]\n\turl = https://me:hunter2@git.example.com/x.git\n";
    let deep = deep_file(&world.ws, &"d".repeat(200), 24, ".gitconfig", config);
    assert!(deep.as_os_str().len() > 4096);
    // The same text at a plain depth is asked about (named, not searched).
    std::fs::write(world.ws.join(".gitconfig"), config).unwrap();

    let ctx = gated(&world, GrepTool.spec(), false);
    let found = call(
        GrepTool,
        &ctx,
        json!({"pattern": "hunter2", "glob": "**/.gitconfig", "output_mode": "content"}),
    )
    .await;
    assert!(!found.contains("hunter2@"), "{found}");
    assert!(found.contains("2 file(s) not searched"), "{found}");
}

/// A home directory reached through a symlink (`/home` -> `/var/home` on Fedora's atomic
/// desktops; `$HOME` as the login set it): the paths a search finds are canonical, so the
/// rules written from the home directory (`~/...`, the bundled `~/.ssh` deny) must see them
/// from the home directory's canonical path, as must the watchdog's home checks.
#[tokio::test]
async fn rules_from_a_home_directory_reached_through_a_symlink_decide_what_a_search_finds() {
    use keel_core::capability::RequirementSet;
    use keel_core::policy::{Policy, PolicyLayers};
    use keel_core::runtime::{Runtime, RuntimeConfig};

    let world = World::new();
    let link = world.tmp.join("home-link");
    std::os::unix::fs::symlink(&world.home, &link).unwrap();
    world.write_global_rules(
        "[[permission]]\npermission = \"fs.read\"\nprefix = \"~/private\"\naction = \"deny\"\n",
    );
    std::fs::create_dir_all(world.home.join("private")).unwrap();
    std::fs::write(
        world.home.join("private/notes.txt"),
        "TOKEN private notes\n",
    )
    .unwrap();
    std::fs::write(world.home.join(".ssh/deploy"), "TOKEN deploy key\n").unwrap();
    std::fs::write(world.home.join("todo.txt"), "TOKEN public\n").unwrap();

    // The workspace is the home directory (its canonical path, as the runtime keeps roots).
    let layers = PolicyLayers::load(&world.home, Some(&world.global), Trust::Trusted)
        .unwrap()
        .with_home(Some(link.clone()));
    let policy = Arc::new(Policy::new(layers, Mode::Allowlist, false).unwrap());
    let runtime = Runtime::new(RuntimeConfig {
        roots: vec![link.clone()],
        requirements: RequirementSet::fs_read(&["{workspace}/**"]),
        scratch_dir: world.tmp.join("scratch"),
        ..RuntimeConfig::default()
    })
    .unwrap();
    let ctx = |tool: keel_core::tool::ToolSpec| ToolContext {
        runtime: runtime.with_search_gate(Arc::new(PolicySearchGate::new(policy.clone(), tool))),
        session: Arc::new(SessionState::new(
            "s1",
            world.tmp.join("scratch"),
            Limits::default(),
            false,
        )),
        call_id: "call-1".into(),
        cancel: CancellationToken::new(),
        progress: ProgressSink::default(),
    };

    let found = call(
        GrepTool,
        &ctx(GrepTool.spec()),
        json!({"pattern": "TOKEN", "glob": "**/*", "output_mode": "content"}),
    )
    .await;
    assert!(found.contains("todo.txt:1:TOKEN public"), "{found}");
    // `~/private` is denied: left out. `~/.ssh` is denied by the bundled rules: left out, not
    // named as a file that asks.
    assert!(!found.contains("private"), "{found}");
    assert!(!found.contains("deploy"), "{found}");
    let listed = call(
        GlobTool,
        &ctx(GlobTool.spec()),
        json!({"pattern": "**/*.txt"}),
    )
    .await;
    assert_eq!(listed.trim(), "todo.txt");
}

/// A git configuration is looked at before a read of it is decided. A FIFO by that name (an
/// archive unpacked into the workspace can hold one; git cannot) has no writer: opening it to
/// look would wait for one for ever, and the decision with it. It is answered at once, as a
/// configuration that cannot be looked at (asked). A regression hangs this test.
#[test]
fn a_fifo_named_like_a_git_configuration_is_decided_without_waiting_for_a_writer() {
    use keel_core::policy::{Action, Call};
    use keel_core::tool::CallTarget;

    let world = World::new();
    for name in [".gitconfig", ".git/config"] {
        let path = world.ws.join(name);
        let _ = std::fs::remove_file(&path);
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        let policy = world.policy(Mode::Allowlist, false, Trust::Trusted);
        let runtime = world.runtime("workspace-writes");
        let spec = super::policy_support::spec("read");
        let target = CallTarget::Path(name.into());
        let decision = policy.decide(&Call {
            spec: &spec,
            target: &target,
            runtime: &runtime,
        });
        assert_eq!(decision.action, Action::Ask, "{name}: {decision:?}");
    }
}

/// The engine resolves a call's path once and decides on where it points; the tool must then
/// act on that path, not resolve the argument again: a symlink swapped in between (a
/// background command can swap one in a loop, and a headless session's denials cost nothing)
/// would point the call at a file nobody decided on. Each step as the engine takes it: parse
/// and resolve, decide, (the swap), prepare, run.
#[tokio::test]
async fn a_symlink_swapped_after_the_decision_does_not_change_what_the_call_reads() {
    use keel_core::policy::{Action, Call};
    use keel_core::tools::read::ReadTool;

    let world = World::new();
    std::fs::write(world.ws.join(".env"), "TOKEN=hunter2\n").unwrap();
    std::fs::write(world.ws.join("README.md"), "TOKEN=public\n").unwrap();
    let link = world.ws.join("l");
    let calls: [(Arc<dyn DynTool>, Value); 3] = [
        (Typed::wrap(ReadTool).unwrap(), json!({"file_path": "l"})),
        (
            Typed::wrap(GrepTool).unwrap(),
            json!({"pattern": "TOKEN", "path": "l", "output_mode": "content"}),
        ),
        (
            Typed::wrap(GlobTool).unwrap(),
            json!({"pattern": "**/*", "path": "l"}),
        ),
    ];
    for (tool, args) in calls {
        let id = tool.spec().id.clone();
        // grep and read are decided on a file, glob on a directory.
        let (decided, swapped) = if id == "glob" {
            ("src", ".git")
        } else {
            ("README.md", ".env")
        };
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(decided, &link).unwrap();
        let policy = world.policy(Mode::Allowlist, false, Trust::Trusted);
        let ctx = gated(&world, tool.spec().clone(), false);
        let mut call = tool.parse_checked(&args, &ctx).unwrap();
        let decision = policy.decide_resolved(
            &Call {
                spec: tool.spec(),
                target: &call.target,
                runtime: &ctx.runtime,
            },
            call.subject.as_deref(),
        );
        assert_eq!(decision.action, Action::Allow, "{id}: {decision:?}");
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(swapped, &link).unwrap();
        tool.prepare(&mut call, &ctx).await.unwrap();
        let out = tool.run(call, &ctx).await.unwrap().text;
        assert!(!out.contains("hunter2"), "{id}: {out}");
        assert!(!out.contains("config"), "{id}: {out}");
        if id == "glob" {
            assert!(out.contains("src/main.rs"), "{id}: {out}");
        } else {
            assert!(out.contains("TOKEN=public"), "{id}: {out}");
        }
    }
}

/// The sandbox masks the home directory's credential files from commands; a search over a
/// workspace that is the home directory must not show what the mask hides: each masked file
/// is one whose read asks (a git configuration only when it holds a credential).
#[tokio::test]
async fn what_the_sandbox_masks_in_the_home_directory_a_search_does_not_show() {
    use keel_core::capability::RequirementSet;
    use keel_core::policy::watchdog::{home_credentials, is_secret_dir, is_secret_path};
    use keel_core::policy::{Policy, PolicyLayers};
    use keel_core::runtime::{Runtime, RuntimeConfig};

    let world = World::new();
    let home = world.home.clone();
    let mut masked = Vec::new();
    for path in home_credentials(&home) {
        let name = path
            .strip_prefix(&home)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if name.contains("gitconfig") || name.ends_with("git/config") {
            // Masked whole for commands; for reads a credential when it holds one.
            continue;
        }
        // A credential directory: one file in it.
        let file = if is_secret_dir(&path) {
            path.join("stored")
        } else {
            path.clone()
        };
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "hunter2\n").unwrap();
        masked.push(file);
    }
    assert!(masked.len() > 20, "{masked:?}");

    let layers = PolicyLayers::load(&home, Some(&world.global), Trust::Trusted)
        .unwrap()
        .with_home(Some(home.clone()));
    let policy = Arc::new(Policy::new(layers, Mode::Yolo, false).unwrap());
    let runtime = Runtime::new(RuntimeConfig {
        roots: vec![home.clone()],
        requirements: RequirementSet::fs_read(&["{workspace}/**"]),
        scratch_dir: world.tmp.join("scratch"),
        ..RuntimeConfig::default()
    })
    .unwrap();
    let ctx = ToolContext {
        runtime: runtime.with_search_gate(Arc::new(PolicySearchGate::new(policy, GrepTool.spec()))),
        session: Arc::new(SessionState::new(
            "s1",
            world.tmp.join("scratch"),
            Limits::default(),
            false,
        )),
        call_id: "call-1".into(),
        cancel: CancellationToken::new(),
        progress: ProgressSink::default(),
    };
    let found = call(
        GrepTool,
        &ctx,
        json!({"pattern": "hunter2", "glob": "**/*", "output_mode": "content"}),
    )
    .await;
    assert!(!found.contains("hunter2"), "{found}");
    for file in &masked {
        assert!(is_secret_path(Some(&home), file), "{}", file.display());
    }
}

/// A bare repository (`git clone --bare` or `--mirror` makes `<name>.git/`) keeps its
/// configuration, and the token of a URL cloned with one, in `<name>.git/config`: it is a
/// repository's configuration as `.git/config` is, for reads and searches alike.
#[tokio::test]
async fn a_bare_repository_s_configuration_is_not_searched() {
    let world = World::new();
    let config = "[core]\n\tbare = true\n[remote \"origin\"]\n\turl = https://me:hunter2@git.example.com/x.git\n";
    for dir in ["mirrors/proj.git", "mirrors/Other.GIT/modules/sub"] {
        std::fs::create_dir_all(world.ws.join(dir)).unwrap();
        std::fs::write(world.ws.join(dir).join("config"), config).unwrap();
    }
    // An ordinary directory's `config` stays searchable.
    std::fs::create_dir_all(world.ws.join("mirrors/proj.github")).unwrap();
    std::fs::write(
        world.ws.join("mirrors/proj.github/config"),
        "url = public\n",
    )
    .unwrap();

    let ctx = gated(&world, GrepTool.spec(), false);
    let found = call(
        GrepTool,
        &ctx,
        json!({"pattern": "url", "path": "mirrors", "output_mode": "content"}),
    )
    .await;
    assert!(!found.contains("hunter2"), "{found}");
    assert!(found.contains("2 file(s) not searched"), "{found}");
    assert!(
        found.contains("proj.github/config:1:url = public"),
        "{found}"
    );
}

/// The ignore files of a search's parents (and a worktree's `.git` file) are read by path,
/// outside the walk's descriptors. A FIFO by one of those names (`mkfifo .gitignore`, or an
/// archive unpacked into the workspace) has no writer: reading it would wait for ever, and the
/// search with it, on a thread no cancellation reaches. It reads as no rules. A regression
/// hangs this test.
#[tokio::test]
async fn a_fifo_named_like_an_ignore_file_above_the_search_does_not_hang_it() {
    let world = World::new();
    std::fs::create_dir_all(world.ws.join("sub/src")).unwrap();
    std::fs::write(world.ws.join("sub/src/lib.rs"), "needle\n").unwrap();
    for name in [".gitignore", ".ignore"] {
        nix::unistd::mkfifo(
            &world.ws.join(name),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
    }
    // A worktree's `.git` file names its repository: a FIFO there too.
    nix::unistd::mkfifo(
        &world.ws.join("sub/.git"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let ctx = gated(&world, GrepTool.spec(), false);
    let found = call(
        GrepTool,
        &ctx,
        json!({"pattern": "needle", "path": "sub/src"}),
    )
    .await;
    assert_eq!(found, "sub/src/lib.rs");
    let ctx = gated(&world, GlobTool.spec(), false);
    let listed = call(GlobTool, &ctx, json!({"pattern": "**/*.rs", "path": "sub"})).await;
    assert_eq!(listed, "sub/src/lib.rs");
}
