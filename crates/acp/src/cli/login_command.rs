//! `keel login`: stores a provider's API key where Keel reads credentials
//! (`keel_core::config::credentials`: `~/.config/keel/credentials.toml`, mode 600, replaced
//! atomically).
//!
//! On a terminal it asks which provider and reads the key without echo; `--provider NAME
//! --key-stdin` is the same without questions (scripts, tests). The editor's login screen runs
//! it through the `terminal` auth method `initialize` advertises (`keel login`, or `keel acp
//! login` when the editor appends the method's arguments to the agent's own).

use std::io::{BufRead as _, IsTerminal as _, Read as _, Write as _};

use keel_core::config::credentials::{self, LOGIN_PROVIDERS};

use super::{EXIT_OK, Failure, LoginArgs, Outcome};

/// Runs `keel login`.
pub fn run(args: LoginArgs) -> Outcome {
    let interactive = !args.key_stdin && std::io::stdin().is_terminal();
    if !interactive && !args.key_stdin {
        return Err(Failure::usage(
            "keel login: stdin is not a terminal; use `keel login --provider NAME --key-stdin` \
             and pipe the key",
        ));
    }
    let provider = match (&args.provider, interactive) {
        (Some(name), _) => find_provider(name)?,
        (None, true) => ask_provider()?,
        (None, false) => find_provider("anthropic")?,
    };
    let (name, variable, example) = provider;
    let key = if interactive {
        say(&format!(
            "{name} API key ({example}; not shown as you type): "
        ))?;
        read_secret()?
    } else {
        let mut key = String::new();
        std::io::stdin()
            .read_to_string(&mut key)
            .map_err(|e| Failure::failed(format!("cannot read the key from stdin: {e}")))?;
        key
    };
    let Some(path) = credentials::path() else {
        return Err(Failure::failed(
            "no home directory: cannot find where to store the key",
        ));
    };
    credentials::store(&path, variable, &key).map_err(Failure::usage)?;
    let mut note = format!(
        "Stored {variable} for {name} in {} (only you can read it).\n",
        path.display()
    );
    if std::env::var(variable).is_ok_and(|value| !value.is_empty()) {
        note.push_str(&format!(
            "Note: {variable} is also set in this environment, and the environment wins.\n"
        ));
    }
    note.push_str(
        "Keel uses it from the next prompt; `keel doctor` checks the provider answers.\n",
    );
    say(&note)?;
    Ok(EXIT_OK)
}

fn find_provider(name: &str) -> Result<(&'static str, &'static str, &'static str), Failure> {
    LOGIN_PROVIDERS
        .iter()
        .find(|(provider, _, _)| provider.eq_ignore_ascii_case(name.trim()))
        .copied()
        .ok_or_else(|| {
            let known: Vec<&str> = LOGIN_PROVIDERS.iter().map(|(name, _, _)| *name).collect();
            Failure::usage(format!(
                "unknown provider `{name}`: use one of {} (local servers such as ollama need no key)",
                known.join(", ")
            ))
        })
}

/// Asks which provider, by number or name (Enter: the first).
fn ask_provider() -> Result<(&'static str, &'static str, &'static str), Failure> {
    let mut question = String::from("Log Keel in to a model provider.\n");
    for (number, (name, variable, _)) in LOGIN_PROVIDERS.iter().enumerate() {
        question.push_str(&format!("  {}. {name} ({variable})\n", number + 1));
    }
    question.push_str("Provider [1]: ");
    say(&question)?;
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::failed(format!("cannot read the answer: {e}")))?;
    let answer = answer.trim();
    if answer.is_empty() {
        return Ok(LOGIN_PROVIDERS[0]);
    }
    if let Ok(number) = answer.parse::<usize>() {
        return LOGIN_PROVIDERS
            .get(number.wrapping_sub(1))
            .copied()
            .ok_or_else(|| Failure::usage(format!("no provider number {number}")));
    }
    find_provider(answer)
}

/// Writes to stderr (stdout stays free for what a command prints).
fn say(text: &str) -> Result<(), Failure> {
    let mut stderr = std::io::stderr().lock();
    stderr
        .write_all(text.as_bytes())
        .and_then(|()| stderr.flush())
        .map_err(|e| Failure::failed(format!("cannot write to the terminal: {e}")))
}

/// One line from the terminal with echo off (restored afterwards, also on error).
fn read_secret() -> Result<String, Failure> {
    use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
    let stdin = std::io::stdin();
    let failed = |e: &dyn std::fmt::Display| Failure::failed(format!("cannot read the key: {e}"));
    let original = tcgetattr(&stdin).map_err(|e| failed(&e))?;
    let mut silent = original.clone();
    silent.local_flags.remove(LocalFlags::ECHO);
    silent.local_flags.insert(LocalFlags::ECHONL);
    tcsetattr(&stdin, SetArg::TCSANOW, &silent).map_err(|e| failed(&e))?;
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    let restored = tcsetattr(&stdin, SetArg::TCSANOW, &original);
    read.map_err(|e| failed(&e))?;
    restored.map_err(|e| failed(&e))?;
    Ok(line)
}
