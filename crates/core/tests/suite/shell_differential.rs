//! What a command allowed without asking runs is what Keel analysed.
//!
//! Thousands of command lines come from a deterministic generator (a fixed seed): line
//! continuations, carriage returns, tabs, comments after a backslash-newline, escaped tabs,
//! quotes of every kind, `$'...'`, globs with classes, ranges and negations over a fixture that
//! holds dot files such as `.env`, `cd` through symlinks and `..`, the tool's own `cwd`. Each is
//! decided by the real policy. For every line decided contained, the rendered script runs
//! under bash with a `PATH` that finds nothing, so that every command reaches a
//! `command_not_found_handle` which records its working directory and argv: each recorded
//! command must be one the analysis holds, with the directory the analysis gave it, and,
//! since every recorded command succeeds, exactly the commands the analysis says run. For
//! lines without the constructs Keel's parser reads otherwise than bash (a carriage return,
//! an escaped tab, a comment after a backslash-newline, a failing `cd`), the line as written
//! must record the same commands as the rendering: Keel's globs and `cd` are bash's.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use keel_core::policy::shell::{Cwd, ShellContext, analyze_from};
use keel_core::policy::{Call, Mode, Trust};
use keel_core::runtime::Runtime;
use serde_json::json;

use super::policy_support::{World, spec};

/// How many lines are generated and decided.
const LINES: usize = 10_000;
/// The generator's seed.
const SEED: u64 = 0x006b_6565_6c2d_3236;

/// SplitMix64: small, deterministic, enough for a generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    fn percent(&mut self, p: usize) -> bool {
        self.below(100) < p
    }
}

/// Words bash and Keel's parser read alike.
const WORDS: &[&str] = &[
    "a.rs",
    "b.rs",
    "Abc.txt",
    "src",
    "lib",
    "x1",
    "'x y'",
    "\"x y\"",
    "'it'\\''s'",
    "\"a\\\"b\"",
    "\"a\\\\b\"",
    "a\\ b",
    "'#not-a-comment'",
    "a#b",
    "'a;b'",
    "'a|b'",
    "\"*.rs\"",
    "'*'",
    "\\*.rs",
    "*.rs",
    "*",
    ".*",
    "[ab].rs",
    "[!a]*.rs",
    "[^a]*.rs",
    "[[:upper:]]*",
    "x[0-9]",
    "x[[:digit:]]",
    "[[:alpha:]][[:digit:]]",
    "l*/*",
    "*/m.rs",
    "lib*/*.rs",
    "lib*/",
    ".e[[:alpha:]]v",
    ".h[[:lower:]]dden",
    "?.rs",
    "src/*",
    "link/*",
    "link/../*.rs",
    "~",
    "~/h.txt",
    "'~'",
    "nomatch*",
    "[",
    "a[",
    "''",
    "\"\"",
    "x\"y\"'z'",
    "'multi\nline'",
    "\"tab\there\"",
];

/// Words Keel's parser reads otherwise than bash, or does not take as literal.
const QUIRKY_WORDS: &[&str] = &[
    // Keel's parser reads `] ]` as one word.
    "] ]",
    "]",
    "$'a\\tb'",
    "$'\\x2e\\x65nv'",
    "$'x'y",
    "ok\\\t#",
    "a\r#b",
];

/// Between words.
const SPACES: &[&str] = &[" ", "  ", "\t", " \\\n", " \\\n  "];
const QUIRKY_SPACES: &[&str] = &["\\\n#", "\\\t", " \r", "\r", "\\\n", " \\\r\n"];

/// Between pipelines.
const JOINERS: &[&str] = &[" && ", " || ", "; ", "\n", " | ", " |& ", ";\n", " &&\n"];

/// Directories `cd` can enter (`src/up` is a symlink to the workspace root, `link` to `lib`,
/// `deeplink` to `deep/inner`).
const CDS: &[&str] = &[
    "cd src",
    "cd link",
    "cd link/..",
    "cd deeplink/..",
    "cd src/up",
    "cd lib",
    "cd -- lib",
    "cd 'deep/inner'",
    "cd ..",
    "cd",
];
/// `cd`s that fail, or that bash and Keel's parser read apart.
const FAILING_CDS: &[&str] = &["cd nonexistent", "cd a.rs", "cd -P link", "cd -"];

const REDIRECTS: &[&str] = &[" 2>/dev/null", " 2>&1", " >/dev/null", " </dev/null"];

const COMMENTS: &[&str] = &[" # done; echo X", "  #x", "\n# only a comment"];

/// A generated line, whether it holds a construct the two parsers read apart, and the tool's
/// `cwd` argument.
struct Line {
    text: String,
    quirky: bool,
    cwd: Option<&'static str>,
}

fn simple_command(rng: &mut Rng, quirky: &mut bool) -> String {
    let (program, options): (&str, &[&str]) = rng.pick(&[
        ("cat", &["-n"][..]),
        ("ls", &["-1", "-d", "-la"][..]),
        ("echo", &["-n"][..]),
        ("head", &["-n 1", "-c 3"][..]),
        ("wc", &["-l", "-c"][..]),
        ("grep", &["-n", "-c"][..]),
        ("sort", &["-r"][..]),
    ]);
    let mut text = program.to_owned();
    let space = |rng: &mut Rng, quirky: &mut bool| {
        if rng.percent(8) {
            *quirky = true;
            rng.pick(QUIRKY_SPACES)
        } else {
            rng.pick(SPACES)
        }
    };
    if rng.percent(30) {
        text.push_str(space(rng, quirky));
        text.push_str(rng.pick(options));
    }
    for _ in 0..rng.below(4) {
        text.push_str(space(rng, quirky));
        if rng.percent(4) {
            *quirky = true;
            text.push_str(rng.pick(QUIRKY_WORDS));
        } else {
            text.push_str(rng.pick(WORDS));
        }
    }
    if rng.percent(10) {
        text.push_str(rng.pick(REDIRECTS));
    }
    text
}

fn generate(rng: &mut Rng) -> Line {
    let mut quirky = false;
    let mut text = String::new();
    let pipelines = 1 + rng.below(3);
    for i in 0..pipelines {
        if i > 0 {
            text.push_str(rng.pick(JOINERS));
        }
        if rng.percent(5) {
            // A nested shell, whose script is generated the same way.
            let mut inner = simple_command(rng, &mut quirky);
            if rng.percent(50) {
                inner.push_str(rng.pick(JOINERS));
                inner.push_str(&simple_command(rng, &mut quirky));
            }
            text.push_str(&format!("bash -c '{}'", inner.replace('\'', r"'\''")));
        } else if rng.percent(20) {
            if rng.percent(15) {
                quirky = true;
                text.push_str(rng.pick(FAILING_CDS));
            } else {
                text.push_str(rng.pick(CDS));
            }
        } else {
            text.push_str(&simple_command(rng, &mut quirky));
        }
    }
    if rng.percent(10) {
        text.push_str(rng.pick(COMMENTS));
    }
    let cwd = if rng.percent(15) {
        Some(rng.pick(&["src", "link", "lib", "deeplink/..", "deep/inner"]))
    } else {
        None
    };
    Line { text, quirky, cwd }
}

/// The workspace the lines run in, besides the policy world's own files.
fn furnish(world: &World) {
    let ws = &world.ws;
    for dir in ["lib", "lib-b", "deep/inner"] {
        std::fs::create_dir_all(ws.join(dir)).unwrap();
    }
    for file in [
        "a.rs",
        "b.rs",
        "Abc.txt",
        "x1",
        "x2",
        ".hidden",
        "lib/m.rs",
        "lib/.dot",
        "lib-b/n.rs",
        "deep/inner/d.txt",
    ] {
        std::fs::write(ws.join(file), "line\n").unwrap();
    }
    std::fs::write(world.home.join("h.txt"), "home\n").unwrap();
    symlink("lib", ws.join("link")).unwrap();
    symlink("deep/inner", ws.join("deeplink")).unwrap();
}

/// One command as recorded or analysed: its physical directory and its argv.
type Run = (PathBuf, Vec<String>);

/// A contained line, every command its analysis holds, and the ones it says run (`None`: not
/// known, a nested shell decides).
type Expected = (Line, Vec<Run>, Option<Vec<Run>>);

/// Runs each `(start, script)` under bash (in a subshell each, from `start`), with every
/// command reaching a handler that records it; the records per script. A record is written in
/// one `write` (its newlines sent as `\x1c`: bash's `printf` flushes at each newline, and the
/// stages of a pipeline append to the log at the same time).
fn record(items: &[(PathBuf, String)], home: &Path, scratch: &Path, name: &str) -> Vec<Vec<Run>> {
    // Bash's own directory on the child's `PATH` holds only `bash` (for `bash -c`, whose
    // commands reach the exported handler too).
    let empty = scratch.join(format!("{name}-path"));
    std::fs::create_dir_all(&empty).unwrap();
    let log = scratch.join(format!("{name}.log"));
    let quote = |text: &str| format!("'{}'", text.replace('\'', r"'\''"));
    let mut batch = String::from(
        "enable -n echo\n\
         command_not_found_handle() {\n\
           local record=\"$PWD\" word\n\
           for word in \"$@\"; do record+=$'\\x1f'\"$word\"; done\n\
           builtin printf '%s\\x1e' \"${record//$'\\n'/$'\\x1c'}\" >> \"$KEEL_LOG\"\n\
           [[ $1 != grep ]]\n\
         }\n\
         export -f command_not_found_handle\n",
    );
    for (i, (start, script)) in items.iter().enumerate() {
        batch.push_str(&format!(
            "builtin printf '\\x1d%d\\x1e' {i} >> \"$KEEL_LOG\"\n\
             builtin cd -- {} && ( eval {} ) </dev/null >/dev/null 2>&1\n",
            quote(&start.display().to_string()),
            quote(script),
        ));
    }
    // The child's `PATH` finds nothing: bash itself is named by its path.
    let bash = std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("bash"))
                .find(|candidate| candidate.is_file())
        })
        .expect("bash on PATH");
    // The end marker shows that the batch ran to its end.
    batch.push_str("builtin printf '\\x1dend\\x1e' >> \"$KEEL_LOG\"\n");
    let script = scratch.join(format!("{name}.sh"));
    std::fs::write(&script, &batch).unwrap();
    symlink(&bash, empty.join("bash")).unwrap();
    let status = Command::new(&bash)
        .arg(&script)
        .env_clear()
        .env("PATH", &empty)
        .env("HOME", home)
        .env("LC_ALL", "C")
        .env("KEEL_LOG", &log)
        .current_dir(scratch)
        .status()
        .unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.ends_with("\u{1d}end\u{1e}"),
        "the batch of {name} did not run to its end ({status})"
    );
    let mut out: Vec<Vec<Run>> = vec![Vec::new(); items.len()];
    let mut current = None;
    for record in text.split('\u{1e}').filter(|r| !r.is_empty()) {
        if let Some(index) = record.strip_prefix('\u{1d}') {
            current = index.parse::<usize>().ok();
            continue;
        }
        let mut fields = record.split('\u{1f}');
        let pwd = fields.next().unwrap().replace('\u{1c}', "\n");
        let pwd = pwd.as_str();
        let dir = std::fs::canonicalize(pwd).unwrap_or_else(|_| PathBuf::from(pwd));
        let argv: Vec<String> = fields.map(|word| word.replace('\u{1c}', "\n")).collect();
        out[current.expect("a record before the first marker")].push((dir, argv));
    }
    out
}

/// What the analysis says runs, every recorded command succeeding but `grep` (which the
/// handler fails): bash's and-or lists over the analysed pipelines (a pipeline's status is its
/// last stage's), `cd` left out (a builtin, not recorded). A rendered `cd` that is skipped or
/// cannot enter its directory ends the line (then `true`: bash would go on with the line as
/// written).
fn expected_runs(
    line: &str,
    context: &ShellContext<'_>,
    start: &Cwd,
) -> (Vec<Run>, Option<Vec<Run>>, bool) {
    let analysis = analyze_from(line, context, start.clone());
    let nested = analysis.pipelines.iter().any(|p| p.depth > 0);
    let mut all = Vec::new();
    let mut run = Vec::new();
    let mut running = true;
    let mut status = 0;
    for pipeline in &analysis.pipelines {
        let skipped = match pipeline.joiner.as_str() {
            "&&" => status != 0,
            "||" => status == 0,
            _ => false,
        };
        if let [only] = pipeline.stages.as_slice()
            && only.program() == "cd"
        {
            let entered = only.directory.as_ref().is_some_and(|d| d.is_dir());
            running &= entered && !skipped;
            status = 0;
            continue;
        }
        for command in pipeline.stages.iter().filter(|c| !c.container) {
            let Cwd::Known(dir) = &command.cwd else {
                panic!("a contained command without a known directory: {line:?}");
            };
            let entry = (dir.clone(), command.original.clone());
            if running && !skipped {
                run.push(entry.clone());
            }
            all.push(entry);
        }
        if !skipped {
            let last = pipeline.stages.last().map(|c| c.program());
            status = i32::from(last == Some("grep"));
        }
    }
    // With a nested shell the statuses cross scripts: only what may run is known.
    (all, (!nested).then_some(run), !running)
}

fn sorted(mut runs: Vec<Run>) -> Vec<Run> {
    runs.sort();
    runs
}

/// What ran against what Keel analysed: every recorded command is one the analysis holds (in
/// its directory), exactly the ones it says run, and the lines compared with bash running them
/// as written ran the same. The failures, and how many commands ran.
fn compare(
    expected: &[Expected],
    ran: &[Vec<Run>],
    rendered: &[(PathBuf, String)],
    raw: &[(usize, (PathBuf, String))],
    ran_raw: &[Vec<Run>],
) -> (Vec<String>, usize) {
    let mut failures = Vec::new();
    let mut commands_run = 0;
    for (((line, all, run), got), (_, script)) in expected.iter().zip(ran).zip(rendered) {
        commands_run += got.len();
        // Every recorded command is one the analysis holds, in its directory.
        let mut pool = all.clone();
        for command in got {
            match pool.iter().position(|c| c == command) {
                Some(at) => {
                    pool.remove(at);
                }
                None => failures.push(format!(
                    "{:?} (cwd {:?}) ran {command:?}, which Keel did not analyse\n  rendered: {script:?}\n  analysed: {all:?}",
                    line.text, line.cwd
                )),
            }
        }
        // And exactly the ones the analysis says run (a `cd` that fails ends the line).
        if let Some(run) = run
            && sorted(got.clone()) != sorted(run.clone())
        {
            failures.push(format!(
                "{:?} (cwd {:?}) ran {got:?}, the analysis says {run:?}\n  rendered: {script:?}",
                line.text, line.cwd
            ));
        }
    }
    for ((index, (_, text)), got) in raw.iter().zip(ran_raw) {
        let line = &expected[*index].0;
        if sorted(got.clone()) != sorted(ran[*index].clone()) {
            failures.push(format!(
                "bash ran {text:?} (cwd {:?}) as {got:?}, Keel's rendering as {:?}\n  rendered: {:?}",
                line.cwd, ran[*index], rendered[*index].1
            ));
        }
    }
    (failures, commands_run)
}

#[test]
fn contained_lines_run_exactly_what_keel_analysed() {
    let started = std::time::Instant::now();
    let world = World::new();
    furnish(&world);
    let policy = world.policy(Mode::Allowlist, false, Trust::Unknown);
    let runtime: Runtime = world.runtime("wide");
    let bash = spec("bash");
    let context = ShellContext {
        roots: runtime.roots(),
        home: Some(&world.home),
        runtime: Some(&runtime),
        scratch: Some(runtime.scratch_dir()),
    };
    let mut rng = Rng(SEED);
    let mut rendered = Vec::new();
    let mut raw = Vec::new();
    let mut expected = Vec::new();
    let mut quirky_contained = 0;
    let mut failing_cd = 0;
    for _ in 0..LINES {
        let line = generate(&mut rng);
        let args = match line.cwd {
            Some(cwd) => json!({ "command": line.text, "cwd": cwd }),
            None => json!({ "command": line.text }),
        };
        let decision = policy.decide(&Call {
            spec: &bash,
            target: &super::policy_support::target(&bash, &args),
            runtime: &runtime,
        });
        if !decision.contained {
            assert!(
                decision.rendered.is_none(),
                "a rendering for a call that is not contained"
            );
            continue;
        }
        let script = decision
            .rendered
            .clone()
            .unwrap_or_else(|| panic!("contained without a rendering: {:?}", line.text));
        let start = match line.cwd {
            Some(cwd) => runtime
                .resolve_checked(cwd, keel_core::capability::Access::Read)
                .unwrap(),
            None => world.ws.clone(),
        };
        let (all, run, cd_fails) = expected_runs(&line.text, &context, &Cwd::Known(start.clone()));
        if line.quirky {
            quirky_contained += 1;
        }
        if line.quirky || cd_fails {
            failing_cd += usize::from(cd_fails);
        } else {
            raw.push((rendered.len(), (start.clone(), line.text.clone())));
        }
        rendered.push((start, script));
        expected.push((line, all, run));
    }
    let decided = started.elapsed();
    let scratch = world.tmp.join("differential");
    std::fs::create_dir_all(&scratch).unwrap();
    let raw_items: Vec<(PathBuf, String)> = raw.iter().map(|(_, item)| item.clone()).collect();
    let (ran, ran_raw) = std::thread::scope(|scope| {
        let rendered_runs = scope.spawn(|| record(&rendered, &world.home, &scratch, "rendered"));
        let raw_runs = record(&raw_items, &world.home, &scratch, "raw");
        (rendered_runs.join().unwrap(), raw_runs)
    });
    let (failures, commands_run) = compare(&expected, &ran, &rendered, &raw, &ran_raw);
    let shown: Vec<&String> = failures.iter().take(15).collect();
    assert!(
        failures.is_empty(),
        "{} failures, the first:\n{}",
        failures.len(),
        shown
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The generator must reach what it is for: many contained lines, quirky ones among them,
    // and commands that really ran.
    assert!(
        rendered.len() >= 2_000,
        "only {} contained lines",
        rendered.len()
    );
    assert!(
        quirky_contained >= 100,
        "only {quirky_contained} quirky contained lines"
    );
    assert!(commands_run >= 2_000, "only {commands_run} commands ran");
    let nested = rendered
        .iter()
        .filter(|(_, script)| script.contains("'bash' '-c'"))
        .count();
    assert!(
        nested >= 100,
        "only {nested} contained lines with a nested shell"
    );
    eprintln!(
        "{LINES} lines: {} contained ({quirky_contained} of them with constructs the parsers \
         read apart, {failing_cd} with a `cd` that fails, {nested} with a nested shell), {} compared with bash running them as \
         written, {commands_run} commands recorded; decided in {:.1?}, {:.1?} in all",
        rendered.len(),
        raw.len(),
        decided,
        started.elapsed()
    );
}
