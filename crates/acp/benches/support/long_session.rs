//! The long session of the ACP bench: 300 text turns of 4 KB prompts on one `keel acp`
//! process, Keel's CPU per turn over the first and the last 50 (`KEEL_BENCH_ONLY=long`).

use super::*;

/// Turns of the long session, the prompt of each, and the turns compared at each end.
const LONG_TURNS: usize = 300;
const LONG_PROMPT_BYTES: usize = 4096;
const LONG_WINDOW: usize = 50;

/// CPU time of every live thread of `pid` so far (`/proc/PID/task/*/schedstat`, first field).
fn threads_cpu(pid: u32) -> Duration {
    let mut total = 0u64;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) {
                total += text
                    .split_whitespace()
                    .next()
                    .and_then(|ns| ns.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    Duration::from_nanos(total)
}

/// Minor faults, major faults, user and system time (10 ms ticks) of process `pid` so far, all
/// its threads (`/proc/PID/stat`): where a turn's CPU goes, counted over many turns.
fn faults_and_modes(pid: u32) -> [u64; 4] {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // After the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    // utime stime (tpgid is -1 without a terminal).
    let at = |index: usize| fields.get(index).and_then(|f| f.parse().ok()).unwrap_or(0);
    [at(7), at(9), at(11), at(12)]
}

/// The program and arguments that start `keel acp` for the long session. For looking inside
/// (not for the figures): `KEEL_BENCH_WRAP` runs `keel acp` under a command (`valgrind
/// --tool=callgrind`).
fn wrapped_keel_acp(program: &Path) -> (PathBuf, Vec<String>) {
    let wrap = std::env::var("KEEL_BENCH_WRAP").unwrap_or_default();
    let mut words: Vec<String> = wrap.split_whitespace().map(String::from).collect();
    words.push(program.to_string_lossy().into_owned());
    words.push("acp".into());
    let spawned = PathBuf::from(words.remove(0));
    (spawned, words)
}

/// The long session's hooks for looking inside `keel acp` (process `pid`), none of them used
/// for the figures.
struct Probes {
    pid: u32,
    /// `KEEL_BENCH_DUMP_TURNS=10,290` has callgrind dump its counts before and after each of
    /// those turns (`callgrind_control -d`), so a dump holds exactly one turn.
    dump_turns: Vec<usize>,
    /// `KEEL_BENCH_PERF=DIR`: `perf record` (cpu-clock samples, kernel and user, with call
    /// graphs) of `keel acp` over each window, to `DIR/first.data` and `DIR/last.data`.
    perf_dir: Option<PathBuf>,
}

impl Probes {
    fn dump_turns_from_env() -> Vec<usize> {
        std::env::var("KEEL_BENCH_DUMP_TURNS")
            .unwrap_or_default()
            .split(',')
            .filter_map(|turn| turn.trim().parse().ok())
            .collect()
    }

    /// Has callgrind dump its counts, labelled `label`, when `turn` is one of the dump turns.
    fn dump_at(&self, turn: usize, label: String) {
        if !self.dump_turns.contains(&turn) {
            return;
        }
        let status = std::process::Command::new("callgrind_control")
            .arg(format!("--dump={label}"))
            .arg(self.pid.to_string())
            .stdout(std::process::Stdio::null())
            .status();
        assert!(
            status.is_ok_and(|status| status.success()),
            "callgrind_control failed"
        );
    }

    fn start_perf(&self, name: &str) -> Option<std::process::Child> {
        let dir = self.perf_dir.as_ref()?;
        let child = std::process::Command::new("perf")
            .args(["record", "-q", "-g", "-e", "cpu-clock", "-F", "20000", "-p"])
            .arg(self.pid.to_string())
            .arg("-o")
            .arg(dir.join(format!("{name}.data")))
            .spawn()
            .ok()?;
        // Time for perf to attach before the window's first turn.
        std::thread::sleep(Duration::from_millis(500));
        Some(child)
    }

    fn stop_perf(child: Option<std::process::Child>) {
        if let Some(mut child) = child {
            let perf = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
            nix::sys::signal::kill(perf, nix::sys::signal::Signal::SIGINT).unwrap();
            child.wait().unwrap();
        }
    }
}

/// What the long session's turns measured.
struct LongRun {
    elapsed: Duration,
    /// Keel's CPU time in each turn.
    per_turn: Vec<Duration>,
    /// The bytes of each turn's request body, as the mock model received them.
    body_bytes: Vec<usize>,
    /// Minor faults, major faults, user and system ticks at the start and end of each window.
    windows: Vec<[u64; 4]>,
}

/// The long session's [`LONG_TURNS`] prompts on `client`'s open `session`.
async fn long_turns(
    client: &TestClient,
    session: &SessionId,
    probes: &Probes,
    bodies: &BodySizes,
) -> LongRun {
    let pid = probes.pid;
    let mut perf = None;
    let mut per_turn = Vec::with_capacity(LONG_TURNS);
    let mut turn_bodies = Vec::with_capacity(LONG_TURNS);
    let mut windows = Vec::new();
    let started = Instant::now();
    for turn in 0..LONG_TURNS {
        let line =
            format!("Part {turn} of the notes: the quick brown fox jumps over the lazy dog. ");
        let prompt =
            line.repeat(LONG_PROMPT_BYTES / line.len() + 1)[..LONG_PROMPT_BYTES].to_owned();
        probes.dump_at(turn, format!("before turn {turn}"));
        if turn == 0 || turn == LONG_WINDOW || turn == LONG_TURNS - LONG_WINDOW {
            windows.push(faults_and_modes(pid));
            Probes::stop_perf(perf.take());
            if turn != LONG_WINDOW {
                perf = probes.start_perf(if turn == 0 { "first" } else { "last" });
            }
        }
        let before = threads_cpu(pid);
        let answer = client.prompt(session, &prompt).await.unwrap();
        per_turn.push(threads_cpu(pid).saturating_sub(before));
        turn_bodies.push(bodies.take_largest());
        probes.dump_at(turn, format!("turn {turn}"));
        assert_eq!(answer.stop_reason, StopReason::EndTurn);
    }
    let elapsed = started.elapsed();
    windows.push(faults_and_modes(pid));
    Probes::stop_perf(perf.take());
    LongRun {
        elapsed,
        per_turn,
        body_bytes: turn_bodies,
        windows,
    }
}

/// The sizes of the request bodies the mock model received since the last look (the title
/// request of the first turn is one of them).
#[derive(Clone, Default)]
struct BodySizes(Arc<std::sync::Mutex<Vec<usize>>>);

impl BodySizes {
    fn record(&self, bytes: usize) {
        self.0.lock().unwrap().push(bytes);
    }

    /// The largest body received since the last call: the turn's own request.
    fn take_largest(&self) -> usize {
        std::mem::take(&mut *self.0.lock().unwrap())
            .into_iter()
            .max()
            .unwrap_or(0)
    }
}

/// The socket's floor: the CPU time a bare writer spends sending `sizes` bytes, one write each,
/// over a loopback TCP connection to a thread that reads and drops them (the median write of
/// three passes). This is what any client of a stateless model API pays to send the
/// conversation, whoever it is: the kernel's copy into the socket and its TCP and loopback work
/// grow with the body.
fn socket_floor(sizes: &[usize]) -> Duration {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let address = listener.local_addr().unwrap();
    let reader = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut buffer = vec![0u8; 256 * 1024];
        while stream.read(&mut buffer).is_ok_and(|read| read > 0) {}
    });
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream.set_nodelay(true).unwrap();
    let body = vec![b'x'; sizes.iter().copied().max().unwrap_or(0)];
    let thread_cpu = || {
        let time = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).unwrap();
        Duration::new(time.tv_sec() as u64, time.tv_nsec() as u32)
    };
    // One pass to grow the connection's buffers as a long-lived connection's are, three measured.
    for &size in sizes {
        stream.write_all(&body[..size]).unwrap();
    }
    let mut writes = Vec::with_capacity(3 * sizes.len());
    for _ in 0..3 {
        for &size in sizes {
            let before = thread_cpu();
            stream.write_all(&body[..size]).unwrap();
            writes.push(thread_cpu() - before);
            // The next request leaves after the answer, as a turn's does: not back to back.
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    drop(stream);
    reader.join().unwrap();
    writes.sort();
    writes[writes.len() / 2]
}

/// Prints the long session's figures: CPU per turn of the two windows, their page faults and
/// user / system split, and the peak RSS (`peak`, KiB).
fn report_long_session(run: &LongRun, peak: Option<u64>) {
    let per_turn = &run.per_turn;
    let mean = |turns: &[Duration]| turns.iter().sum::<Duration>() / turns.len() as u32;
    // The first turns after the warm-up `/help`: turn 1 pays for first-use work.
    let first = mean(&per_turn[..LONG_WINDOW]);
    let last = mean(&per_turn[LONG_TURNS - LONG_WINDOW..]);
    println!(
        "a long session on one `keel acp` process: {LONG_TURNS} text turns of {LONG_PROMPT_BYTES}-byte prompts ({:.1} s)",
        run.elapsed.as_secs_f64()
    );
    println!(
        "  Keel's CPU per turn: first {LONG_WINDOW} turns {first:.2?}, last {LONG_WINDOW} {last:.2?}: {:.2}x (target <= 1.2x)",
        last.as_secs_f64() / first.as_secs_f64()
    );
    let first_bodies = &run.body_bytes[..LONG_WINDOW];
    let last_bodies = &run.body_bytes[LONG_TURNS - LONG_WINDOW..];
    let mean_kb = |sizes: &[usize]| sizes.iter().sum::<usize>() as f64 / sizes.len() as f64 / 1e3;
    let (floor_first, floor_last) = (socket_floor(first_bodies), socket_floor(last_bodies));
    println!(
        "  request body per turn: first {LONG_WINDOW} {:.0} KB, last {LONG_WINDOW} {:.0} KB; the socket's floor for those bytes (a bare writer over loopback): {floor_first:.2?} -> {floor_last:.2?}",
        mean_kb(first_bodies),
        mean_kb(last_bodies),
    );
    let mut sorted = per_turn[LONG_TURNS - LONG_WINDOW..].to_vec();
    sorted.sort();
    let mut early = per_turn[..LONG_WINDOW].to_vec();
    early.sort();
    let (median_first, median_last) = (early[LONG_WINDOW / 2], sorted[LONG_WINDOW / 2]);
    println!(
        "  medians: first {LONG_WINDOW} {median_first:.2?}, last {LONG_WINDOW} {median_last:.2?}: {:.2}x",
        median_last.as_secs_f64() / median_first.as_secs_f64()
    );
    let (own_first, own_last) = (
        median_first.saturating_sub(floor_first),
        median_last.saturating_sub(floor_last),
    );
    println!(
        "  Keel's median CPU per turn less the socket's floor: {own_first:.2?} -> {own_last:.2?}: {:.2}x",
        own_last.as_secs_f64() / own_first.as_secs_f64()
    );
    if let [first_start, first_end, last_start, last_end] = run.windows[..] {
        let per = |index: usize, start: [u64; 4], end: [u64; 4]| {
            end[index].saturating_sub(start[index]) as f64 / LONG_WINDOW as f64
        };
        println!(
            "  page faults per turn: first {LONG_WINDOW} {:.1} minor ({:.2} major), last {LONG_WINDOW} {:.1} minor ({:.2} major)",
            per(0, first_start, first_end),
            per(1, first_start, first_end),
            per(0, last_start, last_end),
            per(1, last_start, last_end),
        );
        println!(
            "  user / system CPU per turn (10 ms ticks, coarse): first {LONG_WINDOW} {:.2} / {:.2} ms, last {LONG_WINDOW} {:.2} / {:.2} ms",
            10.0 * per(2, first_start, first_end),
            10.0 * per(3, first_start, first_end),
            10.0 * per(2, last_start, last_end),
            10.0 * per(3, last_start, last_end),
        );
    }
    if let Some(peak) = peak {
        println!(
            "  peak RSS (VmHWM) after the session: {:.1} MiB",
            peak as f64 / 1024.0
        );
    }
}

/// A 300-turn session of 4 KB prompts on one `keel acp` process: Keel's CPU per turn over the
/// first 50 turns and the last 50.
pub(crate) async fn long_session() {
    let mock = MockModel::start().await;
    // The mock keeps no request: its own work on ever larger bodies is not Keel's. Every
    // request (the turns', and the session title's) gets a short answer.
    mock.lean();
    let bodies = BodySizes::default();
    let recorder = bodies.clone();
    mock.respond_with(Arc::new(move |_, request| {
        recorder.record(request.raw_body.len());
        Some(Reply::anthropic(&Turn::text_only("Noted.").usage(1000, 10)))
    }));
    let program = PathBuf::from(env!("CARGO_BIN_EXE_keel"));
    let home = tempfile::tempdir().unwrap();
    // A window of a million tokens: the 1.2 MB conversation is never compacted, so the last
    // turns carry all of it.
    std::fs::create_dir_all(home.path().join("config/keel")).unwrap();
    std::fs::write(
        home.path().join("config/keel/config.toml"),
        "[providers.anthropic]\ncontext_window = 1000000\n",
    )
    .unwrap();
    let env = isolated_env(home.path(), &mock.base_url(), &[BENCH_MODEL]);
    let (_dir, root) = workspace();
    let (spawned, words) = wrapped_keel_acp(&program);
    let args: Vec<&str> = words.iter().map(String::as_str).collect();
    let dump_turns = Probes::dump_turns_from_env();
    let client = TestClient::spawn(ClientOptions::default(), &spawned, &args, &root, &env)
        .await
        .unwrap();
    client.initialize().await.unwrap();
    let session = client.new_session(&root, &[]).await.unwrap().session_id;
    client.prompt(&session, "/help").await.unwrap();
    let probes = Probes {
        pid: client.pid().unwrap(),
        dump_turns,
        perf_dir: std::env::var_os("KEEL_BENCH_PERF").map(PathBuf::from),
    };
    bodies.take_largest();
    let run = long_turns(&client, &session, &probes, &bodies).await;
    let peak = status_kib(probes.pid, "VmHWM");
    client.close().await.unwrap();
    report_long_session(&run, peak);
}
