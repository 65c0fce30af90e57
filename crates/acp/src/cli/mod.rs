//! The `keel` command line.
//!
//! - [`Cli`] / [`Command`]: the clap definitions (`keel acp`, `exec`, `demo`, `tools`, `tool
//!   call`, `permissions check|list`, `config show|schema|path`).
//! - [`main`]: parses, sets up logging (module `logging`), runs the command on a tokio runtime, prints
//!   an error once to stderr and turns the outcome into the process exit code ([`Failure`]).
//!
//! stdout carries only a command's result (the ACP stream for `keel acp`); logs and progress go
//! to stderr or the log file.

mod config_command;
mod doctor_command;
mod logging;
mod login_command;
mod models_command;
mod permissions_command;
mod sessions_command;
pub use sessions_command::store as sessions_store;
mod sandbox_command;
pub mod style;
mod tools_command;
mod trust_command;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use keel_core::config::{self, Effective, LoadOptions};

/// Exit code of a successful run.
pub const EXIT_OK: u8 = 0;
/// Exit code of a run that failed or was denied (a tool error, a denied call).
pub const EXIT_FAILED: u8 = 1;
/// Exit code of a configuration, model or usage error (nothing ran).
pub const EXIT_USAGE: u8 = 2;

const EXAMPLES: &str = "\
Examples:
  keel acp                                   serve ACP on stdio (what an editor starts)
  keel exec \"explain src/main.rs\"            one headless turn; the answer on stdout
  keel demo                                  an offline session on a scripted model
  keel tools --json                          the registered tools as JSON
  keel tool call read '{\"file_path\":\"README.md\"}' --workspace .
  keel permissions check --tool bash --args '{\"command\":\"rm -rf /\"}'
  keel config show                           the effective settings and where each came from
  keel sessions list                         the stored sessions, most recent first
  keel exec --resume ID \"and now the tests\"  continue a stored session headless
  keel trust grant                           let this project's .keel settings loosen Keel
  keel login                                 store a provider's API key (asks which, hides it)

Exit codes:
  0  success
  1  the run failed or a call was denied (tool error, denied permission)
  2  configuration, model or usage error (nothing ran)

Logs go to stderr (-v info, -vv debug, -vvv trace; RUST_LOG overrides), or to --log-file.
`keel acp` logs to ~/.local/state/keel/keel.log by default: stdout is the protocol.";

/// Keel: a coding agent for editors that speak the Agent Client Protocol.
#[derive(Debug, Parser)]
#[command(name = "keel", version, after_help = EXAMPLES, propagate_version = true)]
pub struct Cli {
    /// Write logs to this file instead of stderr (appends).
    #[arg(long, global = true, value_name = "PATH")]
    pub log_file: Option<PathBuf>,
    /// More logs: -v info, -vv debug, -vvv trace (RUST_LOG, when set, wins).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the Agent Client Protocol on stdin/stdout (an editor starts this).
    Acp(AcpArgs),
    /// Run one prompt headless: progress on stderr, the answer on stdout.
    Exec(ExecArgs),
    /// An offline session on a scripted model, in a scratch copy of a sample project.
    Demo(DemoArgs),
    /// List the registered tools.
    Tools(ToolsArgs),
    /// Run a single tool.
    #[command(subcommand)]
    Tool(ToolCommand),
    /// Inspect the permission rules.
    #[command(subcommand)]
    Permissions(PermissionsCommand),
    /// Inspect the configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// The stored sessions (what `session/list` and `session/load` serve an editor).
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Project trust: whether this project's own settings may loosen Keel.
    Trust(TrustArgs),
    /// The kernel sandbox every shell command runs in.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// The model that will answer and why, and the models the providers offer.
    Models(ModelsArgs),
    /// Store a model provider's API key where Keel reads credentials (asks on a terminal).
    Login(LoginArgs),
    /// Check the configuration, the model and its providers, the sandbox, project trust and the
    /// log location; print the Zed settings for this binary. Exit 1 when something must be fixed.
    Doctor(DoctorArgs),
}

/// `keel doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The workspace to check (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

/// `keel models`.
#[derive(Debug, Args)]
pub struct ModelsArgs {
    /// The workspace whose configuration applies (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    #[command(flatten)]
    pub overrides: Overrides,
}

/// `keel trust`.
#[derive(Debug, Args)]
#[command(after_help = "\
Until you trust a project, its .keel/config.toml and .keel/permissions.toml may only make Keel
stricter. Trust is bound to the files' content: when they change, Keel asks again.")]
pub struct TrustArgs {
    /// The project (default: the current directory).
    #[arg(long, value_name = "DIR", global = true)]
    pub workspace: Option<PathBuf>,
    #[command(subcommand)]
    pub action: Option<TrustAction>,
}

/// `keel trust …`.
#[derive(Debug, Subcommand)]
pub enum TrustAction {
    /// Whether the project is trusted, and what its settings would change (the default).
    Status {
        /// The project (default: the current directory).
        dir: Option<PathBuf>,
    },
    /// Trust the project's settings as they are now.
    Grant {
        /// The project (default: the current directory).
        dir: Option<PathBuf>,
    },
    /// Stop trusting the project.
    Revoke {
        /// The project (default: the current directory).
        dir: Option<PathBuf>,
    },
    /// The trusted projects.
    List,
}

/// `keel sessions …`.
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// The stored sessions, most recently updated first.
    List(SessionsListArgs),
    /// A session's transcript as Markdown.
    Show(SessionsIdArgs),
    /// A session as JSON (its metadata and every event) or Markdown.
    Export(SessionsExportArgs),
    /// Remove a session from the store.
    Rm(SessionsIdArgs),
}

/// `keel sessions list`.
#[derive(Debug, Args)]
pub struct SessionsListArgs {
    /// Only the sessions of this workspace.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A command on one stored session.
#[derive(Debug, Args)]
pub struct SessionsIdArgs {
    /// The session id (see `keel sessions list`).
    pub id: String,
}

/// `keel sessions export`.
#[derive(Debug, Args)]
pub struct SessionsExportArgs {
    /// The session id (see `keel sessions list`).
    pub id: String,
    #[arg(long, value_enum, default_value = "json")]
    pub format: ExportFormat,
}

/// What `keel sessions export` writes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ExportFormat {
    Json,
    Markdown,
}

/// `keel sandbox …`.
#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// What this machine can enforce (namespaces, Landlock, seccomp) and a self-test of each.
    Check(SandboxCheckArgs),
    /// Apply a profile and run PROGRAM (Keel runs this for every shell command).
    #[command(after_help = "Usage: keel sandbox run --profile FILE -- PROGRAM ARGS...")]
    Run {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

/// `keel sandbox check`.
#[derive(Debug, Args)]
pub struct SandboxCheckArgs {
    /// The workspace whose configuration applies (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    #[command(flatten)]
    pub overrides: Overrides,
}

/// Settings every session-like command accepts (they override the configuration files).
#[derive(Debug, Clone, Default, Args)]
pub struct Overrides {
    /// Approval mode: ask, allowlist, yolo or read-only.
    #[arg(long, value_name = "MODE", value_parser = config::Mode::NAMES)]
    pub mode: Option<String>,
    /// Model as provider/model (for example anthropic/claude-sonnet-4-5).
    #[arg(long, value_name = "PROVIDER/MODEL")]
    pub model: Option<String>,
}

/// `keel acp`.
#[derive(Debug, Args)]
pub struct AcpArgs {
    #[command(flatten)]
    pub overrides: Overrides,
    /// `keel acp login`: what an editor runs for the `terminal` auth method when it appends the
    /// method's arguments to the agent's own (the same as `keel login`).
    #[command(subcommand)]
    pub action: Option<AcpAction>,
}

/// `keel acp …`.
#[derive(Debug, Subcommand)]
pub enum AcpAction {
    /// Store a provider's API key (the same as `keel login`).
    Login(LoginArgs),
}

/// `keel login`.
#[derive(Debug, Args)]
#[command(after_help = "\
The key goes to credentials.toml beside the user configuration (~/.config/keel/), readable only
by you; Keel reads it when the provider's variable (ANTHROPIC_API_KEY, ...) is not set.")]
pub struct LoginArgs {
    /// The provider: anthropic, openai, openrouter or deepseek (asked on a terminal).
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// Read the key from stdin instead of asking (scripts; the provider defaults to anthropic).
    #[arg(long)]
    pub key_stdin: bool,
}

/// `keel exec`.
#[derive(Debug, Args)]
#[command(after_help = "\
Exit codes: 0 the turn ended normally; 1 a call was denied or failed, or the turn was cut short;
2 configuration or model error.

With --json, stdout carries one JSON object per line: turn_started, text, tool_call, tool_result,
usage, turn_finished {stop_reason, exit_code}. See docs/configuration.md.")]
pub struct ExecArgs {
    /// The prompt; `-` reads it from stdin.
    pub prompt: String,
    /// The workspace (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// One JSON event per line on stdout instead of the answer text.
    #[arg(long)]
    pub json: bool,
    /// Continue a stored session (see `keel sessions list`) instead of starting a new one; its
    /// workspace is the stored one unless --workspace names another.
    #[arg(long, value_name = "ID")]
    pub resume: Option<String>,
    #[command(flatten)]
    pub overrides: Overrides,
}

/// `keel demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Answer permission prompts automatically even on a terminal.
    #[arg(long)]
    pub yes: bool,
}

/// `keel tools`.
#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// Print JSON (the full specs) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The workspace whose configuration applies (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

/// `keel tool …`.
#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    /// Run one tool through the full runtime and print its result envelope as JSON.
    Call(ToolCallArgs),
}

/// `keel tool call`.
#[derive(Debug, Args)]
#[command(after_help = "\
Example: keel tool call grep '{\"pattern\":\"fn main\"}' --workspace .
Exit code 1 when the envelope is an error (type = \"error\").")]
pub struct ToolCallArgs {
    /// The tool id (see `keel tools`).
    pub id: String,
    /// The arguments as a JSON object.
    #[arg(value_name = "JSON-ARGS")]
    pub args: String,
    /// The workspace root (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    #[command(flatten)]
    pub overrides: Overrides,
}

/// `keel permissions …`.
#[derive(Debug, Subcommand)]
pub enum PermissionsCommand {
    /// What the permission engine decides for one call, and why.
    Check(PermissionsCheckArgs),
    /// The effective rules, by scope.
    List(PermissionsListArgs),
}

/// `keel permissions check`.
#[derive(Debug, Args)]
pub struct PermissionsCheckArgs {
    /// The tool id.
    #[arg(long, value_name = "ID")]
    pub tool: String,
    /// The call's arguments as a JSON object.
    #[arg(long, value_name = "JSON")]
    pub args: String,
    /// The workspace (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Decide as a headless host would (`keel exec`): every ask becomes a denial.
    #[arg(long)]
    pub headless: bool,
    #[command(flatten)]
    pub overrides: Overrides,
}

/// `keel permissions list`.
#[derive(Debug, Args)]
pub struct PermissionsListArgs {
    /// The workspace (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

/// `keel config …`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// The effective configuration, each value annotated with where it came from.
    Show(ConfigShowArgs),
    /// The JSON Schema of the configuration file (for editor completion).
    Schema,
    /// Where the configuration files are.
    Path(ConfigPathArgs),
}

/// `keel config show`.
#[derive(Debug, Args)]
pub struct ConfigShowArgs {
    /// JSON: `{config, sources}` instead of annotated TOML.
    #[arg(long)]
    pub json: bool,
    /// The workspace whose project file applies (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    #[command(flatten)]
    pub overrides: Overrides,
}

/// `keel config path`.
#[derive(Debug, Args)]
pub struct ConfigPathArgs {
    /// The workspace (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

/// Why a command did not succeed: the message printed to stderr and the exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
    /// What a client can read of it (a configuration error's key, file, line and column), for
    /// `keel acp` to put in its errors' `data`.
    pub data: Option<serde_json::Value>,
}

impl Failure {
    /// A configuration, model or usage error (exit 2).
    pub fn usage(message: impl std::fmt::Display) -> Self {
        Self {
            code: EXIT_USAGE,
            message: message.to_string(),
            data: None,
        }
    }

    /// A failed run (exit 1).
    pub fn failed(message: impl std::fmt::Display) -> Self {
        Self {
            code: EXIT_FAILED,
            message: message.to_string(),
            data: None,
        }
    }
}

impl From<config::ConfigError> for Failure {
    fn from(error: config::ConfigError) -> Self {
        Failure {
            data: Some(error.data()),
            ..Failure::usage(&error)
        }
    }
}

/// What a command returns: its exit code, or a failure to report.
pub type Outcome = Result<u8, Failure>;

/// The binary's entry point.
pub fn main() -> ExitCode {
    one_malloc_arena();
    let cli = Cli::parse();
    if let Err(failure) = logging::init(&cli) {
        return report(failure);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return report(Failure::failed(format!("cannot start the runtime: {e}"))),
    };
    let outcome = runtime.block_on(run(cli));
    // Do not wait for tasks stuck in blocking reads (stdin); the outcome is decided.
    runtime.shutdown_background();
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(failure) => report(failure),
    }
}

/// Every thread allocates from glibc's main arena (docs/decisions/0040-one-malloc-arena.md):
/// by default each thread that allocates gets an arena of its own, up to eight per core, and
/// each keeps what it freed; Keel's threads mostly wait, and small allocations come from each
/// thread's cache without the arena's lock. `MALLOC_ARENA_MAX` or `GLIBC_TUNABLES` in the
/// environment keep their say.
fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none()
        && std::env::var_os("GLIBC_TUNABLES").is_none()
    {
        // SAFETY: mallopt only changes glibc's allocator settings, and runs before any other
        // thread exists; a value it refuses leaves the defaults.
        #[expect(
            unsafe_code,
            reason = "glibc's mallopt, called before any thread starts"
        )]
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    }
}

fn report(failure: Failure) -> ExitCode {
    tracing::debug!(code = failure.code, "exiting: {}", failure.message);
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "keel: {}", failure.message);
    ExitCode::from(failure.code)
}

/// Runs a parsed command.
pub async fn run(cli: Cli) -> Outcome {
    match cli.command {
        Command::Acp(AcpArgs {
            action: Some(AcpAction::Login(args)),
            ..
        })
        | Command::Login(args) => login_command::run(args),
        Command::Acp(args) => acp(args).await,
        Command::Exec(args) => crate::exec::run(args).await,
        Command::Demo(args) => crate::demo::run(args).await,
        Command::Tools(args) => tools_command::list(args),
        Command::Tool(ToolCommand::Call(args)) => tools_command::call(args).await,
        Command::Permissions(PermissionsCommand::Check(args)) => permissions_command::check(args),
        Command::Permissions(PermissionsCommand::List(args)) => permissions_command::list(args),
        Command::Config(ConfigCommand::Show(args)) => config_command::show(args),
        Command::Config(ConfigCommand::Schema) => config_command::schema(),
        Command::Config(ConfigCommand::Path(args)) => config_command::path(args),
        Command::Sessions(SessionsCommand::List(args)) => sessions_command::list(args),
        Command::Sessions(SessionsCommand::Show(args)) => sessions_command::show(args),
        Command::Sessions(SessionsCommand::Export(args)) => sessions_command::export(args),
        Command::Sessions(SessionsCommand::Rm(args)) => sessions_command::remove(args),
        Command::Trust(args) => trust_command::run(args),
        Command::Sandbox(SandboxCommand::Check(args)) => sandbox_command::check(args),
        Command::Models(args) => models_command::run(args).await,
        Command::Doctor(args) => doctor_command::run(args).await,
        // `main` runs the helper before the command line is parsed; reaching here means the
        // arguments were not `run ...`.
        Command::Sandbox(SandboxCommand::Run { .. }) => Err(Failure::usage(
            "usage: keel sandbox run --profile FILE -- PROGRAM ARGS...",
        )),
    }
}

/// `keel acp`: serves ACP on stdin/stdout until the editor closes stdin. Sessions' scratch
/// directories live under a temporary directory removed at exit.
async fn acp(args: AcpArgs) -> Outcome {
    let cwd = std::env::current_dir().ok();
    let scratch = keel_core::runtime::scratch::temp_dir("keel-acp-")
        .map_err(|e| Failure::failed(format!("cannot create a scratch directory: {e}")))?;
    // The process environment, then the keys `keel login` stored (read at each lookup: a login
    // in the editor's terminal serves the next prompt).
    let env = keel_core::config::credentials::lookup();
    // A broken configuration must not keep the editor from talking to Keel: the server still
    // answers `initialize`, and `session/new` fails with the error (which is also logged).
    let engine_config = load_config(cwd.clone(), &args.overrides).and_then(|effective| {
        let mut engine_config = config::engine_config(
            &effective,
            env,
            scratch.path().to_path_buf(),
            cwd.as_deref(),
        )
        .map_err(Failure::usage)?;
        // Keel's own helper (`keel-sandbox` beside it, else itself) confines every command.
        engine_config.sandbox.set_keel(std::env::current_exe().ok());
        Ok(engine_config)
    });
    // A signal ends serving like EOF does, so the scratch directory is still removed. The
    // handlers are in place before the server says it serves.
    let terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    let interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
    let serving = match engine_config {
        Ok(engine_config) => {
            tracing::info!(
                mode = %engine_config.mode,
                model = ?engine_config.model,
                "keel acp {} serving on stdio",
                env!("CARGO_PKG_VERSION")
            );
            let engine = keel_core::agent::Engine::new(engine_config);
            futures::future::Either::Left(crate::server::serve_stdio(engine))
        }
        Err(failure) => {
            tracing::error!(
                "keel acp {}: the configuration did not load; every session/new will fail: {}",
                env!("CARGO_PKG_VERSION"),
                failure.message
            );
            futures::future::Either::Right(crate::server::serve_stdio_broken(
                failure.message,
                failure.data,
            ))
        }
    };
    let served = tokio::select! {
        served = serving => served,
        signal = termination(terminate, interrupt) => {
            tracing::info!("{signal}: shutting down");
            Ok(())
        }
    };
    // Background commands end with Keel (EOF or a signal), each checked gone.
    for (job, state) in keel_core::runtime::jobs::stop_everywhere().await {
        tracing::info!(job, %state, "background command stopped at exit");
    }
    if let Err(e) = scratch.close() {
        tracing::warn!("cannot remove the scratch directory: {e}");
    }
    served.map_err(|e| Failure::failed(format!("{e:#}")))?;
    Ok(EXIT_OK)
}

/// Resolves when the process is asked to stop (SIGINT or SIGTERM), naming the signal.
async fn termination(
    terminate: std::io::Result<tokio::signal::unix::Signal>,
    interrupt: std::io::Result<tokio::signal::unix::Signal>,
) -> &'static str {
    async fn next(signal: std::io::Result<tokio::signal::unix::Signal>, name: &str) {
        match signal {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::warn!("cannot watch for {name}: {e}");
                std::future::pending::<()>().await;
            }
        }
    }
    tokio::select! {
        () = next(terminate, "SIGTERM") => "SIGTERM",
        () = next(interrupt, "SIGINT") => "SIGINT",
    }
}

/// The workspace a command works in: the given directory, or the current one.
pub fn workspace_or_cwd(workspace: Option<&PathBuf>) -> Result<PathBuf, Failure> {
    let dir = match workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()
            .map_err(|e| Failure::usage(format!("cannot read the current directory: {e}")))?,
    };
    std::path::absolute(&dir)
        .map_err(|e| Failure::usage(format!("bad workspace {}: {e}", dir.display())))
}

/// Loads the layered configuration for a command: the process environment, the workspace's
/// project file, then the command's flags.
pub fn load_config(
    workspace: Option<PathBuf>,
    overrides: &Overrides,
) -> Result<Effective, Failure> {
    let mut options = LoadOptions::from_env(workspace);
    if let Some(mode) = &overrides.mode {
        options = options.flag("mode", mode.as_str(), "--mode");
    }
    if let Some(model) = &overrides.model {
        options = options.flag("model", model.as_str(), "--model");
    }
    let effective = config::load(&options)?;
    tracing::debug!(files = ?effective.files, "configuration loaded");
    Ok(effective)
}

/// Writes `text` to stdout (the one place a command's result goes).
pub fn write_stdout(text: &str) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| Failure::failed(format!("cannot write to stdout: {e}")))
}
