//! The sandbox's cost per command: the real helper (`keel-sandbox`, and `keel sandbox run`),
//! against spawning the program directly.
//!
//! Two measures per run:
//!
//! - **spawn → program start** (the measure): the program is this very benchmark binary,
//!   re-run with `KEEL_BENCH_STAMP=1`, which prints `CLOCK_MONOTONIC` first thing in `main` and
//!   exits. The benchmark reads the same clock just before spawning (the helper does not unshare
//!   a time namespace, so both readings are on one clock). The direct spawn of the same binary
//!   is the baseline; the difference is everything the helper adds before the program runs: its
//!   own exec, reading the profile, the namespaces and mounts (or Landlock and seccomp), and the
//!   program's spawn from inside the sandbox. That is an upper bound of "from the helper's start
//!   to the program's start" (it also counts the helper's exec).
//! - **spawn → exit**: the same runs, until the helper has exited (the tear-down included).
//! - **CPU time**: user + system time of the helper and everything it waited for (init, the
//!   program), from this process's `cutime` + `cstime` (`/proc/self/stat`, in 10 ms ticks, so
//!   only the mean over all runs is meaningful): what the sandbox costs the machine whatever
//!   the load, where the wall-clock times above include waiting for a core.
//!
//! And `session/cancel` over the real `keel acp` binary (stdio, the mock model over HTTP on
//! loopback): a confined command that started a daemon which left its session, cancelled; the
//! time from sending the cancel to the prompt's `cancelled` answer, and until no process the
//! command started is alive (polled every millisecond).
#![expect(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "a benchmark reports on stdout and sets up its own fixtures"
)]

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{PermissionOptionKind, StopReason};
use keel_testkit::acp_client::{ClientOptions, PermissionReply, TestClient, isolated_env};
use keel_testkit::measure::{children_cpu_time, load_average, running_with};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::json;

use keel_core::runtime::sandbox::{
    Classify, CredentialIndex, DEFAULT_HOME_READABLE, Mechanism, Profile,
};
use nix::time::{ClockId, clock_gettime};

const WARMUP: usize = 5;
const RUNS: usize = 100;
const STAMP: &str = "KEEL_BENCH_STAMP";

fn now_ns() -> i128 {
    let t = clock_gettime(ClockId::CLOCK_MONOTONIC).unwrap();
    i128::from(t.tv_sec()) * 1_000_000_000 + i128::from(t.tv_nsec())
}

/// Median, p95, min in milliseconds.
fn stats(mut samples: Vec<f64>) -> (f64, f64, f64) {
    samples.sort_by(f64::total_cmp);
    (
        samples[samples.len() / 2],
        samples[(samples.len() * 95 / 100).min(samples.len() - 1)],
        samples[0],
    )
}

/// CPU time (user + system) of the waited-for descendants so far, in milliseconds.
fn children_cpu_ms() -> f64 {
    children_cpu_time(std::process::id()).as_secs_f64() * 1000.0
}

/// Spawn → program start and spawn → exit in milliseconds for each timed run, and the mean CPU
/// time per timed run.
fn time(mut command: impl FnMut() -> Command) -> (Vec<f64>, Vec<f64>, f64) {
    let (mut starts, mut exits) = (Vec::new(), Vec::new());
    let mut cpu_start = children_cpu_ms();
    for i in 0..WARMUP + RUNS {
        let mut cmd = command();
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .env(STAMP, "1");
        if i == WARMUP {
            cpu_start = children_cpu_ms();
        }
        let t0 = now_ns();
        let mut child = cmd.spawn().unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let status = child.wait().unwrap();
        let t_exit = now_ns();
        assert!(status.success(), "{status:?}: {out}");
        let started: i128 = out.trim().parse().unwrap();
        if i >= WARMUP {
            starts.push((started - t0) as f64 / 1e6);
            exits.push((t_exit - t0) as f64 / 1e6);
        }
    }
    let cpu = (children_cpu_ms() - cpu_start) / RUNS as f64;
    (starts, exits, cpu)
}

fn profile(base: &Path, mechanism: Mechanism, program_dir: &Path) -> PathBuf {
    let profile = profile_value(base, mechanism, program_dir);
    let scratch = base.join(format!("scratch-{mechanism:?}"));
    let path = scratch.join("profile.json");
    std::fs::write(&path, serde_json::to_string(&profile).unwrap()).unwrap();
    path
}

fn profile_value(base: &Path, mechanism: Mechanism, program_dir: &Path) -> Profile {
    let ws = base.join("ws");
    let home = base.join("home");
    let scratch = base.join(format!("scratch-{mechanism:?}"));
    for dir in [&ws, &home.join(".cargo"), &scratch.join("tmp")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    Profile {
        build: keel_core::runtime::sandbox::profile::HELPER_BUILD.to_owned(),
        nonce: "bench".into(),
        status_file: scratch.join("status"),
        required: true,
        mechanism,
        cwd: ws.clone(),
        writable: vec![ws.clone()],
        // The stamping program (this benchmark's binary).
        readable: vec![program_dir.to_path_buf()],
        protected: vec![ws.join(".git/hooks")],
        pinned: vec![ws.join(".git")],
        home: Some(home.clone()),
        home_readable: DEFAULT_HOME_READABLE.iter().map(|r| home.join(r)).collect(),
        home_writable: Vec::new(),
        tmp_dir: scratch.join("tmp"),
        staging_dir: scratch.join("root"),
        network: false,
        proxy: None,
        masked: Vec::new(),
        mask_ruleset: None,
        mask_socket: None,
        done_fifo: None,
        keeper: None,
        no_connect: false,
        // The stamping program is told by a variable of its own that it is the one timed.
        env_allow: keel_core::runtime::sandbox::DEFAULT_ENV_ALLOW
            .iter()
            .copied()
            .chain([STAMP])
            .map(str::to_owned)
            .collect(),
    }
}

fn row(name: &str, samples: Vec<f64>, baseline: Option<f64>) -> f64 {
    let (median, p95, min) = stats(samples);
    let cost = baseline
        .map(|b| format!("  (cost: median {:.2} ms)", median - b))
        .unwrap_or_default();
    println!("{name:<44} median {median:>6.2} ms  p95 {p95:>6.2} ms  min {min:>6.2} ms{cost}");
    median
}

const CANCELS: usize = 30;

async fn cancel(keel: &Path) {
    let mock = MockModel::start().await;
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let env = isolated_env(
        home.path(),
        &mock.base_url(),
        &[("KEEL_MODEL", "anthropic/bench-model")],
    );
    let client = TestClient::spawn(ClientOptions::default(), keel, &["acp"], &root, &env)
        .await
        .unwrap();
    client.initialize().await.unwrap();
    let (mut answered, mut gone) = (Vec::new(), Vec::new());
    for run in 0..WARMUP + CANCELS {
        let daemon = format!("600.{}{run}1", std::process::id());
        let main = format!("600.{}{run}2", std::process::id());
        mock.push_anthropic(Turn::new().tool_call(
            "t1",
            "bash",
            json!({ "command": format!("(setsid sleep {daemon} &); exec sleep {main}") }),
        ));
        let session = client.new_session(&root, &[]).await.unwrap().session_id;
        client.prompt(&session, "/help").await.unwrap();
        client.push_permissions([PermissionReply::Choose(PermissionOptionKind::AllowOnce)]);
        let prompt = client.start_prompt(&session, "wait");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !(running_with(&daemon) && running_with(&main)) {
            assert!(Instant::now() < deadline, "the command never started");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let started = Instant::now();
        client.cancel(&session).unwrap();
        let response = prompt.await.unwrap().unwrap();
        let answer = started.elapsed();
        assert_eq!(response.stop_reason, StopReason::Cancelled);
        while running_with(&daemon) || running_with(&main) {
            assert!(Instant::now() < deadline, "the command outlived the cancel");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        if run >= WARMUP {
            answered.push(answer.as_secs_f64() * 1000.0);
            gone.push(started.elapsed().as_secs_f64() * 1000.0);
        }
    }
    client.close().await.unwrap();
    println!("session/cancel over `keel acp` ({CANCELS} runs, a confined command and its daemon)");
    row("cancel -> `cancelled` answer", answered, None);
    row("cancel -> nothing the command started alive", gone, None);
}

fn main() {
    if std::env::var_os(STAMP).is_some() {
        // The program being timed: the clock first, then nothing else.
        let t = now_ns();
        let mut stdout = std::io::stdout();
        let _ = writeln!(stdout, "{t}");
        return;
    }
    let keel = env!("CARGO_BIN_EXE_keel");
    let me = std::env::current_exe().unwrap().canonicalize().unwrap();
    let program_dir = me.parent().unwrap().to_path_buf();
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    println!(
        "sandbox cost per command ({RUNS} runs, load {})",
        load_average()
    );
    let small = env!("CARGO_BIN_EXE_keel-sandbox");
    if std::env::var("KEEL_BENCH_ONLY").is_ok_and(|only| only == "contained") {
        // The contained profile under the fallback alone.
        contained_cost(&base, &me, &program_dir, small, &[Mechanism::Landlock]);
        println!("load after: {}", load_average());
        return;
    }
    let (start, exit, cpu) = time(|| Command::new(&me));
    let direct_start = row("direct: spawn -> program start", start, None);
    let direct_exit = row("direct: spawn -> exit", exit, None);
    println!("{:<44} mean {cpu:>6.2} ms", "direct: CPU time");
    let direct_cpu = cpu;
    // The helper as sessions run it (`keel-sandbox`, beside `keel`) and as `keel sandbox run`
    // (the fallback when it is missing).
    let helpers: [(&str, &str, &[&str]); 2] = [
        ("keel-sandbox", small, &["run"]),
        ("keel sandbox", keel, &["sandbox", "run"]),
    ];
    for mechanism in [Mechanism::Namespaces, Mechanism::Landlock] {
        let profile = profile(&base, mechanism, &program_dir);
        for (name, program, args) in helpers {
            let (start, exit, cpu) = time(|| {
                let mut cmd = Command::new(program);
                cmd.args(args)
                    .arg("--profile")
                    .arg(&profile)
                    .arg("--")
                    .arg(&me);
                cmd
            });
            row(
                &format!("{name}, {mechanism:?}: spawn -> program start"),
                start,
                Some(direct_start),
            );
            row(
                &format!("{name}, {mechanism:?}: spawn -> exit"),
                exit,
                Some(direct_exit),
            );
            println!(
                "{:<44} mean {cpu:>6.2} ms  (cost: {:.2} ms)",
                format!("{name}, {mechanism:?}: CPU time"),
                cpu - direct_cpu
            );
        }
    }
    contained_cost(
        &base,
        &me,
        &program_dir,
        small,
        &[Mechanism::Namespaces, Mechanism::Landlock],
    );
    guard_cost(&base, &me, &program_dir, small);
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(cancel(Path::new(keel)));
    println!("load after: {}", load_average());
}

/// The contained profile's workspace (`big/` under the base): this many directories of
/// [`BIG_FILES`] empty files each, with [`BIG_SECRETS`] `.env` files spread among them.
const BIG_DIRS: usize = 1000;
const BIG_FILES: usize = 100;
const BIG_SECRETS: usize = 50;

/// Writes the 100,000-file workspace with its credential files; its path.
fn big_workspace(base: &Path) -> PathBuf {
    let ws = base.join("big");
    for d in 0..BIG_DIRS {
        let dir = ws.join(format!("d{d:04}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..BIG_FILES {
            std::fs::File::create(dir.join(format!("f{f:03}.txt"))).unwrap();
        }
    }
    for i in 0..BIG_SECRETS {
        std::fs::write(
            ws.join(format!("d{:04}/.env", i * (BIG_DIRS / BIG_SECRETS))),
            "K=v\n",
        )
        .unwrap();
    }
    ws
}

/// The credential list from the index: the first (the walk) and its time in milliseconds, then
/// each warm list's time.
fn credential_lists(index: &CredentialIndex) -> (Vec<PathBuf>, f64, Vec<f64>) {
    let t0 = Instant::now();
    let first = index.current();
    let walk = t0.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(first.len(), BIG_SECRETS);
    let mut lists = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let found = index.current();
        lists.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(found.len(), BIG_SECRETS);
    }
    (first, walk, lists)
}

/// What the contained profile's runs share: where profiles are written, the stamping program,
/// the helper, the big workspace and the credential files found in it.
struct Contained<'a> {
    base: &'a Path,
    me: &'a Path,
    program_dir: &'a Path,
    helper: &'a str,
    ws: PathBuf,
    credentials: Vec<PathBuf>,
}

impl Contained<'_> {
    /// A read-only profile in the big workspace: nothing writable, the workspace readable.
    fn read_only(&self, mechanism: Mechanism) -> Profile {
        let mut profile = profile_value(self.base, mechanism, self.program_dir);
        profile.cwd = self.ws.clone();
        profile.writable = Vec::new();
        profile.readable.push(self.ws.clone());
        profile
    }

    /// The helper with the credential files masked against the same helper without them:
    /// spawn -> exit medians and mean CPU times, the unmasked first.
    fn masks_against_none(&self, mechanism: Mechanism) -> (Vec<f64>, Vec<f64>) {
        let plain = self.read_only(mechanism);
        let mut masked = plain.clone();
        masked.masked = self.credentials.clone();
        let mut medians = Vec::new();
        let mut cpus = Vec::new();
        for (name, profile) in [
            ("read-only, no masks", plain),
            ("contained, 50 masks", masked),
        ] {
            let path = write_profile(self.base, &profile, name);
            let (_, exit, cpu) = time(|| {
                let mut cmd = Command::new(self.helper);
                cmd.arg("run")
                    .arg("--profile")
                    .arg(&path)
                    .arg("--")
                    .arg(self.me);
                cmd
            });
            medians.push(row(
                &format!("{name}, {mechanism:?}: spawn -> exit"),
                exit,
                None,
            ));
            cpus.push(cpu);
            println!("{:<44} mean {cpu:>6.2} ms", format!("{name}: CPU time"));
        }
        (medians, cpus)
    }

    /// The masks as one ruleset Keel builds (once per change of the list) and the helper
    /// inherits: its first build, its check per command, and the helper applying it, against
    /// `medians` and `cpus` of [`Contained::masks_against_none`]; `list` is the credential list's
    /// median.
    fn prebuilt_masks(
        &self,
        mechanism: Mechanism,
        classify: &Classify,
        list: f64,
        medians: &[f64],
        cpus: &[f64],
    ) {
        let masks = keel_core::runtime::sandbox::mask::MaskRulesets::default();
        let t0 = Instant::now();
        let fd = masks
            .ruleset_for(&self.credentials, Some(classify))
            .unwrap();
        let build = t0.elapsed().as_secs_f64() * 1000.0;
        let mut checks = Vec::new();
        for _ in 0..RUNS {
            let t = Instant::now();
            let again = masks
                .ruleset_for(&self.credentials, Some(classify))
                .unwrap();
            checks.push(t.elapsed().as_secs_f64() * 1000.0);
            // The same ruleset; an entry that appeared meanwhile in a directory on the way (the
            // machine's `/tmp`) may have added a rule to it (another generation).
            assert_eq!(again.raw(), fd.raw());
        }
        assert_eq!(masks.stats().built, 1);
        let mut prebuilt = self.read_only(mechanism);
        prebuilt.masked = self.credentials.clone();
        prebuilt.mask_ruleset = Some(fd.raw());
        let path = write_profile(self.base, &prebuilt, "contained prebuilt");
        let (_, exit, cpu) = time(|| {
            let mut cmd = Command::new(self.helper);
            cmd.arg("run")
                .arg("--profile")
                .arg(&path)
                .arg("--")
                .arg(self.me);
            fd.inherit(&mut cmd);
            cmd
        });
        println!(
            "{:<44} mean {cpu:>6.2} ms (CPU cost over no masks {:.2}, split per command {:.2})",
            "contained, prebuilt masks: CPU time",
            cpu - cpus[0],
            cpus[1] - cpus[0]
        );
        let applied = row(
            &format!("contained, prebuilt masks, {mechanism:?}: spawn -> exit"),
            exit,
            None,
        );
        self.fetched_masks(&prebuilt, &fd);
        warm_holder(
            &prebuilt,
            &fd,
            &self.ws,
            self.me,
            self.helper,
            (medians[0], cpus[0]),
        );
        let check = row("prebuilt masks: check per command (warm)", checks, None);
        println!(
            "{:<44} {:.2} ms (ruleset {:.2} + check {check:.3} + list {list:.3}; first build {build:.1} ms)",
            format!("contained cost, prebuilt, {mechanism:?}"),
            applied - medians[0] + check + list,
            applied - medians[0],
        );
    }

    /// The same ruleset fetched from Keel's socket by a helper that inherits nothing, as the
    /// editor's terminal starts it (`mask_server`): a one-use key per command, in its
    /// environment.
    fn fetched_masks(&self, prebuilt: &Profile, fd: &keel_core::runtime::sandbox::mask::MaskFd) {
        let server = keel_core::runtime::sandbox::mask_server::MaskServer::default();
        let dir = self.base.join("mask-server");
        std::fs::create_dir_all(&dir).unwrap();
        let (socket, _, _) = server.offer(&dir, fd.clone()).unwrap();
        let mut fetching = prebuilt.clone();
        fetching.mask_ruleset = None;
        fetching.mask_socket = Some(socket);
        let path = write_profile(self.base, &fetching, "contained fetched");
        let mut offers = Vec::new();
        let (_, exit, cpu) = time(|| {
            let (_, key, offer) = server.offer(&dir, fd.clone()).unwrap();
            offers.push(offer);
            let mut cmd = Command::new(self.helper);
            cmd.arg("run")
                .arg("--profile")
                .arg(&path)
                .arg("--")
                .arg(self.me)
                .env(keel_sandbox::MASK_KEY_ENV, key);
            cmd
        });
        println!(
            "{:<44} mean {cpu:>6.2} ms",
            "contained, masks fetched (terminal): CPU time"
        );
        row(
            "contained, masks fetched (terminal): spawn -> exit",
            exit,
            None,
        );
    }
}

/// The contained profile's cost over the approved one, in a workspace of 100,000 files holding
/// 50 credential files: the credential list per command (the index, warm: one inotify drain)
/// and the helper with 50 masks against the same helper without them. Under the fallback also
/// with the masks as the ruleset Keel builds once (`mask::MaskRulesets`, decision 0033): its
/// first build, its check per command (warm: one inotify drain), and the helper applying it.
/// `KEEL_BENCH_ONLY=contained` runs this alone, under the fallback.
fn contained_cost(
    base: &Path,
    me: &Path,
    program_dir: &Path,
    helper: &str,
    mechanisms: &[Mechanism],
) {
    let ws = big_workspace(base);
    let classify = keel_core::policy::watchdog::credential_rules(None).0;
    let index = CredentialIndex::new(vec![ws.clone()], classify.clone());
    let (credentials, walk, lists) = credential_lists(&index);
    println!(
        "contained profile, {} files, {BIG_SECRETS} credential files (first walk {walk:.1} ms)",
        BIG_DIRS * BIG_FILES + BIG_SECRETS
    );
    let list = row("credential list per command (warm index)", lists, None);
    let contained = Contained {
        base,
        me,
        program_dir,
        helper,
        ws,
        credentials,
    };
    for &mechanism in mechanisms {
        let (medians, cpus) = contained.masks_against_none(mechanism);
        println!(
            "{:<44} {:.2} ms (masks {:.2} + list {list:.3})",
            format!("contained cost, {mechanism:?}"),
            medians[1] - medians[0] + list,
            medians[1] - medians[0],
        );
        if mechanism == Mechanism::Landlock {
            contained.prebuilt_masks(mechanism, &classify, list, &medians, &cpus);
        }
    }
}

/// The same contained profile from the fallback's warm holder (decision 0039): one zygote whose
/// holder applied the profile's ruleset and the prebuilt masks once, each command forked from
/// it. Spawn → exit is from the request until the zygote's `exit` answer (everything the
/// command left ended) and the end of its output; the CPU is the zygote's, the holder's, the
/// starters' and the programs', over all runs, the holder's start included (the zygote is
/// waited for at the end), against the helper's read-only run without masks (`baseline`:
/// median spawn → exit, mean CPU).
fn warm_holder(
    prebuilt: &Profile,
    fd: &keel_core::runtime::sandbox::mask::MaskFd,
    ws: &Path,
    me: &Path,
    helper: &str,
    baseline: (f64, f64),
) {
    use keel_core::runtime::sandbox::zygote::{WarmStart, Zygotes};
    use std::os::fd::OwnedFd;
    let mut domain = prebuilt.clone();
    domain.nonce = String::new();
    domain.status_file = PathBuf::new();
    domain.cwd = PathBuf::new();
    let warm = WarmStart {
        helper: PathBuf::from(helper),
        prefix: Vec::new(),
        profile: serde_json::to_string(&domain).unwrap(),
        mask: Some(fd.clone()),
        argv: vec![me.to_str().unwrap().to_owned()],
        nonce: "bench".into(),
        status_file: prebuilt.status_file.clone(),
    };
    let zygotes = Zygotes::default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cpu_start = children_cpu_ms();
    let (mut starts, mut exits) = (Vec::new(), Vec::new());
    runtime.block_on(async {
        for i in 0..WARMUP + RUNS {
            let (mut reader, writer) = std::io::pipe().unwrap();
            let t0 = now_ns();
            let mut child = zygotes
                .spawn(
                    &warm,
                    ws,
                    vec![(STAMP.to_owned(), "1".to_owned())],
                    OwnedFd::from(writer.try_clone().unwrap()),
                    OwnedFd::from(writer),
                )
                .unwrap();
            let mut out = String::new();
            reader.read_to_string(&mut out).unwrap();
            let status = child.wait().await.unwrap();
            let t_exit = now_ns();
            assert!(status.success(), "{status:?}: {out}");
            let started: i128 = out.trim().parse().unwrap();
            if i >= WARMUP {
                starts.push((started - t0) as f64 / 1e6);
                exits.push((t_exit - t0) as f64 / 1e6);
            }
        }
    });
    assert_eq!(zygotes.started(), 1);
    zygotes.shutdown();
    let cpu = (children_cpu_ms() - cpu_start) / (WARMUP + RUNS) as f64;
    row(
        "contained, warm holder: spawn -> program start",
        starts,
        None,
    );
    let exit = row("contained, warm holder: spawn -> exit", exits, None);
    println!(
        "{:<44} mean {cpu:>6.2} ms (holder's start included)",
        "contained, warm holder: CPU time"
    );
    println!(
        "{:<44} {:+.2} ms wall-clock, {:+.2} ms CPU (vs read-only without masks, per-command helper)",
        "contained cost, warm holder, Landlock",
        exit - baseline.0,
        cpu - baseline.1,
    );
}

/// The guard's cost per command that may write the workspace (docs/sandbox.md, "Files other
/// programs run"), in the 100,000-file workspace of [`contained_cost`] with a repository's
/// hooks and configuration, an editor's and CI's files, and `.envrc` files: the snapshot before
/// and the comparison after (the warm index: two inotify drains, one `lstat` per guarded entry,
/// nothing changed), and the helper with the top-level ones bound read-only against the same
/// helper without them. Target: at most 0.5 ms (median).
fn guard_cost(base: &Path, me: &Path, program_dir: &Path, helper: &str) {
    use keel_core::runtime::sandbox::{GuardSnapshot, protected_paths};
    let ws = base.join("big");
    let hooks = ws.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for hook in [
        "pre-commit",
        "pre-push",
        "commit-msg",
        "post-checkout",
        "pre-rebase",
    ] {
        std::fs::write(hooks.join(format!("{hook}.sample")), "#!/bin/sh\n").unwrap();
    }
    std::fs::write(ws.join(".git/config"), "[core]\n\tbare = false\n").unwrap();
    std::fs::create_dir_all(ws.join(".vscode")).unwrap();
    std::fs::write(ws.join(".vscode/settings.json"), "{}\n").unwrap();
    std::fs::create_dir_all(ws.join(".github/workflows")).unwrap();
    std::fs::write(ws.join(".github/workflows/ci.yml"), "on: push\n").unwrap();
    std::fs::write(ws.join(".envrc"), "use flake\n").unwrap();
    for d in [1, 10, 100] {
        std::fs::write(ws.join(format!("d{d:04}/.envrc")), "export A=1\n").unwrap();
    }
    let index = std::sync::Arc::new(
        CredentialIndex::new(
            vec![ws.clone()],
            keel_core::policy::watchdog::credential_rules(None).0,
        )
        .with_guard(Some(keel_core::policy::watchdog::guard_rules())),
    );
    let t0 = Instant::now();
    let listed = index.guarded();
    let walk = t0.elapsed().as_secs_f64() * 1000.0;
    let roots = [ws.clone()];
    let mut rounds = Vec::new();
    let mut top_level = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let snapshot = GuardSnapshot::take(&roots, Some(&index));
        let said = snapshot.restore(false);
        rounds.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(said.is_empty(), "{said:?}");
        top_level = snapshot.top_level();
    }
    println!(
        "guarded files, {} entries in the same workspace (first walk {walk:.1} ms)",
        listed.len()
    );
    let round = row("guard: snapshot before + compare after", rounds, None);
    let mut plain = profile_value(base, Mechanism::Namespaces, program_dir);
    plain.cwd = ws.clone();
    plain.writable = vec![ws.clone()];
    let mut bound = plain.clone();
    let (protected, pinned) = protected_paths(&bound.writable, &top_level);
    bound.protected = protected;
    bound.pinned = pinned;
    let mut medians = Vec::new();
    for (name, profile) in [
        ("writable, no binds", plain),
        ("writable, guard binds", bound),
    ] {
        let path = write_profile(base, &profile, name);
        let (_, exit, _) = time(|| {
            let mut cmd = Command::new(helper);
            cmd.arg("run").arg("--profile").arg(&path).arg("--").arg(me);
            cmd
        });
        medians.push(row(
            &format!("{name}, Namespaces: spawn -> exit"),
            exit,
            None,
        ));
    }
    println!(
        "{:<44} {:.2} ms (binds {:.2} + snapshot and compare {round:.3}; target 0.5)",
        "guard cost per command",
        medians[1] - medians[0] + round,
        medians[1] - medians[0],
    );
}

fn write_profile(base: &Path, profile: &Profile, name: &str) -> PathBuf {
    let path = base.join(format!("{}.json", name.replace([' ', ','], "-")));
    std::fs::write(&path, serde_json::to_string(profile).unwrap()).unwrap();
    path
}
