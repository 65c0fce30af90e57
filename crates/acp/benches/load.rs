//! Load on one `keel acp` process (issue 19): 50 sessions at once, each running read → edit →
//! bash turns against the mock model over HTTP, then one session of 1,000 turns.
//!
//! The mock answers from the request itself (a `Responder`), so concurrent sessions cannot be
//! scripted into each other's replies: each prompt names its session and turn, each step is
//! read from the conversation, and each session edits a counter in its own workspace. Cross
//! talk would show as a failed edit, a wrong count or a wrong answer; all three are checked.
//!
//! Reported: wall time, per-turn latency (p50, p99), the agent's overhead per turn (turn minus
//! the mock model's time, which is a few loopback round trips), peak and final RSS of `keel
//! acp`, errors, and processes left behind. `cargo bench -p keel-acp --bench load`.
#![expect(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "a benchmark reports on stdout and sets up its own fixtures"
)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{PermissionOptionKind, SessionId, StopReason};
use keel_testkit::acp_client::{ClientOptions, PermissionReply, TestClient, isolated_env};
use keel_testkit::measure::{
    MachineCpu, StallProbe, children_cpu_time, cpu_time, load_average, status_kib, vmstat,
};
use keel_testkit::mock_model::{Api, MockModel, RecordedRequest, Reply, Turn};
use serde_json::{Value, json};

const SESSIONS: usize = 50;
const TURNS_EACH: usize = 12;
const LONG_SESSION_TURNS: usize = 1_000;
/// Model requests in one scripted turn: read, edit, bash, answer.
const REQUESTS_A_TURN: u32 = 4;
/// How long, on average, the mock model thinks before each answer (0 in the saturated run).
static MODEL_DELAY_MS: AtomicU64 = AtomicU64::new(0);
/// Per session, the nanoseconds the mock actually waited before its answers: a timer fires
/// late when the benchmark's own process is busy, and that lateness is the mock's, not Keel's.
static WAITED: std::sync::OnceLock<Vec<Arc<AtomicU64>>> = std::sync::OnceLock::new();

fn waited(session: usize) -> Arc<AtomicU64> {
    WAITED.get_or_init(|| (0..SESSIONS).map(|_| Arc::default()).collect())[session].clone()
}

/// Per session, the model requests of its current turn as the mock saw them: when each was
/// complete, and the session's `WAITED` then. They split a turn's overhead into its steps.
static ARRIVALS: std::sync::OnceLock<Vec<Arrivals>> = std::sync::OnceLock::new();

/// One session's [`ARRIVALS`]: when each request was complete, and `WAITED` then.
type Arrivals = Mutex<Vec<(Instant, u64)>>;

fn arrivals(session: usize) -> &'static Arrivals {
    &ARRIVALS.get_or_init(|| (0..SESSIONS).map(|_| Mutex::default()).collect())[session]
}

/// The parts of a turn's overhead, in order: what happens before each model request and after
/// the last answer.
const PHASES: [&str; REQUESTS_A_TURN as usize + 1] = [
    "prompt -> first request",
    "read (no approval)",
    "edit (approval, write)",
    "bash (approval, sandboxed command)",
    "answer -> end of turn",
];

/// A turn's overhead split into [`PHASES`]: the time between one request's answer (once the
/// mock has waited) and the next request, from the prompt to its answer. `None` when the mock
/// did not see the turn's four requests.
fn phases(
    asked: Instant,
    arrived: &[(Instant, u64)],
    ended: Instant,
    waited_at_end: u64,
) -> Option<[Duration; PHASES.len()]> {
    if arrived.len() != REQUESTS_A_TURN as usize {
        return None;
    }
    let mut parts = [Duration::ZERO; PHASES.len()];
    parts[0] = arrived[0].0.saturating_duration_since(asked);
    let mut marks: Vec<(Instant, u64)> = arrived.to_vec();
    marks.push((ended, waited_at_end));
    for (step, pair) in marks.windows(2).enumerate() {
        let between = pair[1].0.saturating_duration_since(pair[0].0);
        let thinking = Duration::from_nanos(pair[1].1.saturating_sub(pair[0].1));
        parts[step + 1] = between.saturating_sub(thinking);
    }
    Some(parts)
}

/// The mock's thinking time before answering `step` of `turn` in `session`: between half and
/// one and a half times the mean, fixed by the three numbers, so the bench can subtract it and
/// sessions do not all answer in the same instant.
fn model_delay(session: usize, turn: usize, step: usize) -> Duration {
    let mean = MODEL_DELAY_MS.load(Ordering::Relaxed);
    let mut hash = (session as u64) << 32 ^ (turn as u64) << 16 ^ step as u64;
    hash = hash.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    hash ^= hash >> 29;
    Duration::from_millis(mean / 2 + hash % (mean + 1))
}

fn percentile(samples: &mut [Duration], percent: usize) -> Duration {
    samples.sort();
    samples[(samples.len() * percent / 100).min(samples.len() - 1)]
}

/// `session S turn T` from the newest prompt of an Anthropic request.
fn prompt_of(body: &Value) -> Option<(usize, usize)> {
    let messages = body["messages"].as_array()?;
    let text = messages.iter().rev().find_map(|message| {
        (message["role"] == "user")
            .then(|| message["content"].as_array())
            .flatten()?
            .iter()
            .find_map(|block| {
                (block["type"] == "text")
                    .then(|| block["text"].as_str())
                    .flatten()
            })
    })?;
    let mut words = text.split_whitespace();
    match (words.next(), words.next(), words.next(), words.next()) {
        (Some("session"), Some(session), Some("turn"), Some(turn)) => {
            Some((session.parse().ok()?, turn.parse().ok()?))
        }
        _ => None,
    }
}

/// Tool results since the newest prompt: the step of the turn.
fn step_of(body: &Value) -> usize {
    let Some(messages) = body["messages"].as_array() else {
        return 0;
    };
    messages
        .iter()
        .rev()
        .take_while(|message| {
            !(message["role"] == "user"
                && message["content"]
                    .as_array()
                    .is_some_and(|blocks| blocks.iter().any(|block| block["type"] == "text")))
        })
        .filter(|message| message["role"] == "assistant")
        .count()
}

/// The scripted turn: read the counter, bump it, show it, answer.
fn respond(api: Api, request: &RecordedRequest) -> Option<Reply> {
    if api != Api::Anthropic {
        return None;
    }
    let (session, turn) = prompt_of(&request.body)?;
    let id = |step: &str| format!("s{session}t{turn}{step}");
    let step = step_of(&request.body);
    let reply = match step {
        0 => Turn::new().tool_call(id("r"), "read", json!({"file_path": "counter.txt"})),
        1 => Turn::new().tool_call(
            id("e"),
            "edit",
            json!({"file_path": "counter.txt", "old_string": format!("count = {turn}"), "new_string": format!("count = {}", turn + 1)}),
        ),
        2 => Turn::new().tool_call(id("b"), "bash", json!({"command": "cat counter.txt"})),
        _ => {
            // The bash result the model got must be this session's counter, just bumped.
            let shown = request.raw_body.contains(&format!("session {session}\\ncount = {}", turn + 1));
            Turn::text_only(if shown {
                format!("session {session} turn {turn} done")
            } else {
                format!("session {session} turn {turn} saw another session")
            })
        }
    };
    arrivals(session % SESSIONS).lock().unwrap().push((
        request.received_at,
        waited(session % SESSIONS).load(Ordering::Relaxed),
    ));
    Some(
        Reply::anthropic(&reply)
            .delay_counted(model_delay(session, turn, step), waited(session % SESSIONS)),
    )
}

struct Keel {
    client: TestClient,
    pid: u32,
    _home: tempfile::TempDir,
}

async fn spawn(mock: &MockModel, cwd: &Path, approvals: usize) -> Keel {
    let home = tempfile::tempdir().unwrap();
    let env = isolated_env(
        home.path(),
        &mock.base_url(),
        &[("KEEL_MODEL", "anthropic/bench-model")],
    );
    let client = TestClient::spawn(
        ClientOptions::default().permissions(vec![
            PermissionReply::Choose(
                PermissionOptionKind::AllowOnce
            );
            approvals
        ]),
        Path::new(env!("CARGO_BIN_EXE_keel")),
        &["acp"],
        cwd,
        &env,
    )
    .await
    .unwrap();
    client.initialize().await.unwrap();
    let pid = client.pid().unwrap();
    Keel {
        client,
        pid,
        _home: home,
    }
}

/// Processes whose working directory is one of `roots` (what a command left running).
fn left_behind(roots: &[PathBuf]) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|entry| {
            std::fs::read_link(entry.path().join("cwd"))
                .is_ok_and(|cwd| roots.iter().any(|root| cwd.starts_with(root)))
        })
        .count()
}

/// One workspace a session, each holding its own counter at 0: the guards and the canonical
/// paths.
fn counter_workspaces() -> (Vec<tempfile::TempDir>, Vec<PathBuf>) {
    let mut dirs = Vec::new();
    let mut roots = Vec::new();
    for session in 0..SESSIONS {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(
            root.join("counter.txt"),
            format!("session {session}\ncount = 0\n"),
        )
        .unwrap();
        roots.push(root);
        dirs.push(dir);
    }
    (dirs, roots)
}

/// The largest `VmRSS` of `pid` seen, sampled every 20 ms until the task is aborted.
fn sample_peak_rss(pid: u32) -> (Arc<AtomicU64>, tokio::task::JoinHandle<()>) {
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let peak = peak.clone();
        tokio::spawn(async move {
            loop {
                if let Some(rss) = status_kib(pid, "VmRSS") {
                    peak.fetch_max(rss, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    (peak, sampler)
}

/// A turn's times: the whole turn, the model's thinking (what the mock actually waited, at
/// least the nominal delays), and the nominal delays.
type TurnTimes = (Duration, Duration, Duration);

/// What one session's turns gave: each turn's times, each turn's overhead split into
/// [`PHASES`], and the turns that failed.
struct SessionRun {
    times: Vec<TurnTimes>,
    parts: Vec<[Duration; PHASES.len()]>,
    errors: usize,
}

/// Session `index`'s [`TURNS_EACH`] turns, one after the other.
async fn run_session(
    client: Arc<TestClient>,
    session: SessionId,
    index: usize,
    mean_delay: Duration,
) -> SessionRun {
    let mut run = SessionRun {
        times: Vec::new(),
        parts: Vec::new(),
        errors: 0,
    };
    // With a thinking model, sessions start spread over a second, as an editor's threads
    // do not all send at once (the saturated run starts them together).
    if !mean_delay.is_zero() {
        tokio::time::sleep(Duration::from_millis(20) * u32::try_from(index).unwrap()).await;
    }
    for turn in 0..TURNS_EACH {
        let waited_before = waited(index).load(Ordering::Relaxed);
        arrivals(index).lock().unwrap().clear();
        let asked = Instant::now();
        match client
            .prompt(&session, &format!("session {index} turn {turn}"))
            .await
        {
            Ok(answer) if answer.stop_reason == StopReason::EndTurn => {}
            _ => run.errors += 1,
        }
        let ended = Instant::now();
        let waited_at_end = waited(index).load(Ordering::Relaxed);
        run.parts.extend(phases(
            asked,
            &arrivals(index).lock().unwrap(),
            ended,
            waited_at_end,
        ));
        let nominal: Duration = (0..REQUESTS_A_TURN as usize)
            .map(|step| model_delay(index, turn, step))
            .sum();
        let actual = Duration::from_nanos(waited_at_end - waited_before);
        run.times
            .push((ended - asked, actual.max(nominal), nominal));
    }
    run
}

/// Every session's turns at once, gathered.
async fn run_sessions(
    client: &Arc<TestClient>,
    sessions: &[SessionId],
    mean_delay: Duration,
) -> SessionRun {
    let mut runs = Vec::new();
    for (index, session) in sessions.iter().enumerate() {
        runs.push(tokio::spawn(run_session(
            client.clone(),
            session.clone(),
            index,
            mean_delay,
        )));
    }
    let mut all = SessionRun {
        times: Vec::new(),
        parts: Vec::new(),
        errors: 0,
    };
    for run in runs {
        let run = run.await.unwrap();
        all.times.extend(run.times);
        all.parts.extend(run.parts);
        all.errors += run.errors;
    }
    all
}

/// The counters a run's costs are read from, taken before its first prompt.
struct Meter {
    started: Instant,
    cpu: Duration,
    own_cpu: Duration,
    commands_cpu: Duration,
    machine: MachineCpu,
    faults: (u64, u64),
    probe: StallProbe,
}

/// What a run cost: its wall time, the CPU time of `keel acp`, of this process and of the
/// commands, the machine's, page faults and reclaim, and the machine's pauses.
struct Costs {
    wall: Duration,
    cpu: Duration,
    own_cpu: Duration,
    commands_cpu: Duration,
    machine: MachineCpu,
    faults: (u64, u64),
    stalls: keel_testkit::measure::Stalls,
}

impl Meter {
    fn start(pid: u32) -> Self {
        Meter {
            started: Instant::now(),
            cpu: cpu_time(pid),
            own_cpu: cpu_time(std::process::id()),
            commands_cpu: children_cpu_time(pid),
            machine: MachineCpu::now(),
            faults: (vmstat("pgmajfault"), vmstat("pgscan_direct")),
            probe: StallProbe::start().unwrap(),
        }
    }

    fn stop(self, pid: u32) -> Costs {
        Costs {
            wall: self.started.elapsed(),
            cpu: cpu_time(pid) - self.cpu,
            own_cpu: cpu_time(std::process::id()) - self.own_cpu,
            commands_cpu: children_cpu_time(pid) - self.commands_cpu,
            machine: MachineCpu::now().since(self.machine),
            faults: (
                vmstat("pgmajfault") - self.faults.0,
                vmstat("pgscan_direct") - self.faults.1,
            ),
            stalls: self.probe.stop(),
        }
    }
}

/// The sessions that did not get their own answers, or whose counter was not bumped once per
/// turn.
fn with_cross_talk(client: &TestClient, sessions: &[SessionId], roots: &[PathBuf]) -> usize {
    let mut cross_talk = 0;
    for (index, (session, root)) in sessions.iter().zip(roots).enumerate() {
        let said: String = client
            .updates(session)
            .iter()
            .filter_map(|update| match update {
                agent_client_protocol::v1::schema::SessionUpdate::AgentMessageChunk(chunk) => {
                    match &chunk.content {
                        agent_client_protocol::v1::schema::ContentBlock::Text(text) => {
                            Some(text.text.clone())
                        }
                        _ => None,
                    }
                }
                _ => None,
            })
            .collect();
        let counter = std::fs::read_to_string(root.join("counter.txt")).unwrap();
        let expected =
            (0..TURNS_EACH).all(|turn| said.contains(&format!("session {index} turn {turn} done")));
        if !expected
            || said.contains("another session")
            || !counter.contains(&format!("count = {TURNS_EACH}"))
        {
            cross_talk += 1;
        }
    }
    cross_talk
}

/// The run's header, wall time, turn latency and the agent's overhead (by phase when the model
/// thinks).
fn report_turns(mean_delay: Duration, wall: Duration, run: &mut SessionRun) {
    let times = &run.times;
    let turns = times.len();
    let mut agent: Vec<Duration> = times.iter().map(|(turn, ..)| *turn).collect();
    // The agent's overhead in a turn: everything but the model's thinking (the time the mock
    // actually waited before each answer); commands, approvals and loopback round trips count
    // as overhead. Against the nominal delays, the mock's own lateness would count too.
    let mut overhead: Vec<Duration> = times
        .iter()
        .map(|(turn, thinking, ..)| turn.saturating_sub(*thinking))
        .collect();

    let mut against_nominal: Vec<Duration> = times
        .iter()
        .map(|(turn, _, nominal)| turn.saturating_sub(*nominal))
        .collect();
    let late: Vec<Duration> = times
        .iter()
        .map(|(_, actual, nominal)| actual.saturating_sub(*nominal))
        .collect();
    println!(
        "{SESSIONS} concurrent sessions x {TURNS_EACH} read/edit/bash turns on one keel acp ({turns} turns, {REQUESTS_A_TURN} model requests and 2 approvals each), model thinking {:?} to {:?} before each answer",
        mean_delay / 2,
        mean_delay * 3 / 2
    );
    println!(
        "  wall time                         {wall:>10.2?}  ({:.1} turns/s)",
        turns as f64 / wall.as_secs_f64()
    );
    println!(
        "  turn latency p50 / p99            {:>10.2?} / {:.2?}",
        percentile(&mut agent, 50),
        percentile(&mut agent, 99)
    );
    println!(
        "  agent overhead a turn p50 / p99 / max {:>6.2?} / {:.2?} / {:.2?}  (turn minus the model's thinking)",
        percentile(&mut overhead, 50),
        percentile(&mut overhead, 99),
        overhead.iter().max().copied().unwrap_or_default()
    );
    if !mean_delay.is_zero() {
        println!(
            "    against the nominal delays p99 {:.2?}; the mock's timers fired late by {:.2?} a turn on average, {:.2?} at most",
            percentile(&mut against_nominal, 99),
            late.iter().sum::<Duration>() / u32::try_from(turns).unwrap(),
            late.iter().max().copied().unwrap_or_default()
        );
    }
    if !mean_delay.is_zero() {
        report_phases(&mut run.parts);
    }
}

/// How a run ended for `keel acp`: its memory (kB), the failed turns, the sessions with cross
/// talk and the processes left behind.
struct Ending {
    hwm: u64,
    peak_sampled: u64,
    final_rss: u64,
    errors: usize,
    cross_talk: usize,
    leftovers: usize,
}

/// The run's memory, CPU time (`keel acp`'s, the commands', the bench's, the machine's), the
/// machine's pauses and the failures.
fn report_costs(costs: &Costs, turns: usize, ending: &Ending) {
    let Costs {
        cpu,
        own_cpu,
        commands_cpu,
        machine,
        faults,
        stalls,
        ..
    } = costs;
    let turns = u32::try_from(turns).unwrap();
    println!(
        "  keel acp RSS: peak (VmHWM) {:.1} MiB, sampled max {:.1} MiB, at the end {:.1} MiB",
        ending.hwm as f64 / 1024.0,
        ending.peak_sampled as f64 / 1024.0,
        ending.final_rss as f64 / 1024.0
    );
    println!(
        "  keel acp CPU time: {cpu:.2?} in all, {:.2?} a turn (the agent's own work; commands, sandbox helpers and the mock are other processes)",
        *cpu / turns
    );
    println!(
        "  commands' CPU time (sandbox helper, bash, cat): {commands_cpu:.2?} in all, {:.2?} a turn",
        *commands_cpu / turns
    );
    println!(
        "  the bench's own CPU time (client and mock model): {own_cpu:.2?} in all, {:.2?} a turn",
        *own_cpu / turns
    );
    println!(
        "  the machine (/proc/stat): {:.2?} busy; {:.2?} stolen by the hypervisor (time this machine's CPUs were ready to run and did not)",
        machine.busy, machine.steal
    );
    println!(
        "    major page faults (a page read back from disk) {}, pages scanned by direct reclaim {}",
        faults.0, faults.1
    );
    println!(
        "    a thread that naps 2 ms at a time woke up {:.2?} late at worst; {} pauses of the whole machine over {:.0?} ({:.2?} in all)",
        stalls.worst,
        stalls.long,
        keel_testkit::measure::Stalls::LONG,
        stalls.long_total,
    );
    println!(
        "  errors {}, sessions with cross talk {}, processes left behind {}",
        ending.errors, ending.cross_talk, ending.leftovers
    );
}

async fn concurrent_sessions(mock: &MockModel, mean_delay: Duration) {
    MODEL_DELAY_MS.store(
        u64::try_from(mean_delay.as_millis()).unwrap(),
        Ordering::Relaxed,
    );
    let (dirs, roots) = counter_workspaces();
    let keel = spawn(mock, &roots[0], SESSIONS * TURNS_EACH * 2).await;
    let client = Arc::new(keel.client);
    let mut sessions = Vec::new();
    for root in &roots {
        sessions.push(client.new_session(root, &[]).await.unwrap().session_id);
    }
    let (peak, sampler) = sample_peak_rss(keel.pid);
    let meter = Meter::start(keel.pid);
    let mut run = run_sessions(&client, &sessions, mean_delay).await;
    let costs = meter.stop(keel.pid);
    sampler.abort();
    // Every session's own answers, and its own counter, bumped once per turn.
    let cross_talk = with_cross_talk(&client, &sessions, &roots);
    let final_rss = status_kib(keel.pid, "VmRSS").unwrap_or(0);
    let hwm = status_kib(keel.pid, "VmHWM").unwrap_or(0);
    let client = Arc::into_inner(client).unwrap();
    client.close().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ending = Ending {
        hwm,
        peak_sampled: peak.load(Ordering::Relaxed),
        final_rss,
        errors: run.errors,
        cross_talk,
        leftovers: left_behind(&roots),
    };
    report_turns(mean_delay, costs.wall, &mut run);
    report_costs(&costs, run.times.len(), &ending);
    drop(dirs);
}

/// Where a turn's overhead goes: each phase's p50, p99 and max, and what the slowest 1% of turns
/// spent in each.
fn report_phases(parts: &mut [[Duration; PHASES.len()]]) {
    println!("  the overhead by phase, p50 / p99 / max, and the mean in the slowest 1% of turns:");
    parts.sort_by_key(|turn| turn.iter().sum::<Duration>());
    let slowest = &parts[parts.len() - parts.len().div_ceil(100)..];
    for (phase, name) in PHASES.iter().enumerate() {
        let mut samples: Vec<Duration> = parts.iter().map(|turn| turn[phase]).collect();
        let tail: Duration = slowest.iter().map(|turn| turn[phase]).sum();
        println!(
            "    {name:<36} {:>9.2?} / {:>9.2?} / {:>9.2?}   slowest: {:.2?}",
            percentile(&mut samples, 50),
            percentile(&mut samples, 99),
            samples.iter().max().copied().unwrap_or_default(),
            tail / u32::try_from(slowest.len()).unwrap()
        );
    }
}

async fn long_session() {
    // A mock of its own that keeps no requests: recording a thousand growing bodies would be
    // the mock's cost, not the agent's.
    let mock = &MockModel::start().await;
    mock.lean();
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let keel = spawn(mock, &root, 0).await;
    let session = keel
        .client
        .new_session(&root, &[])
        .await
        .unwrap()
        .session_id;
    let mut times = Vec::new();
    let mut rss = Vec::new();
    let mut cpu = Vec::new();
    let mut cpu_mark = cpu_time(keel.pid);
    for turn in 0..LONG_SESSION_TURNS {
        mock.push_anthropic(Turn::text_only(format!("answer {turn}")));
        let asked = Instant::now();
        let answer = keel
            .client
            .prompt(&session, &format!("question {turn}"))
            .await
            .unwrap();
        assert_eq!(answer.stop_reason, StopReason::EndTurn);
        times.push(asked.elapsed());
        if turn % 100 == 99 {
            rss.push(status_kib(keel.pid, "RssAnon").unwrap_or(0));
            let now = cpu_time(keel.pid);
            cpu.push((now - cpu_mark) / 100);
            cpu_mark = now;
        }
    }
    keel.client.close().await.unwrap();
    let mut first: Vec<Duration> = times[..100].to_vec();
    let mut last: Vec<Duration> = times[times.len() - 100..].to_vec();
    println!("one session of {LONG_SESSION_TURNS} text turns");
    println!(
        "  turn time, turns 1-100: p50 {:.2?} p99 {:.2?}; turns 901-1000: p50 {:.2?} p99 {:.2?}",
        percentile(&mut first, 50),
        percentile(&mut first, 99),
        percentile(&mut last, 50),
        percentile(&mut last, 99)
    );
    println!("  RssAnon every 100 turns (KiB): {rss:?}");
    println!("  keel acp CPU a turn, per 100 turns: {cpu:.2?}");
}

#[tokio::main]
async fn main() {
    println!("load average before: {}", load_average());
    let mock = MockModel::start().await;
    // Nothing reads the requests back: the responder checks each one as it comes.
    mock.lean();
    mock.respond_with(Arc::new(respond));
    // Saturated: every session's next request as soon as the last is answered.
    concurrent_sessions(&mock, Duration::ZERO).await;
    // As with a real model: each answer takes a while, so turns interleave rather than queue.
    concurrent_sessions(&mock, Duration::from_millis(1_000)).await;
    MODEL_DELAY_MS.store(0, Ordering::Relaxed);
    long_session().await;
    println!("load average after: {}", load_average());
}
