//! Network shapes: exfiltration (files, credentials or the environment sent to a host) and
//! download-and-execute (a download piped into an interpreter, or run after it lands).

use std::collections::BTreeSet;

use super::checks::{Findings, deny, escalate, operands};
use super::{Watchdog, WatchdogCategory as Category};
use crate::policy::commands::is_interpreter;
use crate::policy::pattern::base_name;
use crate::policy::shell::{Pipeline, SimpleCommand};
use crate::policy::wrappers::SHELLS;
use crate::tool::view::code;

const DOWNLOADERS: &[&str] = &[
    "curl",
    "wget",
    "fetch",
    "aria2c",
    "http",
    "https",
    "xh",
    "lwp-request",
    "GET",
];

const NETWORK_SENDERS: &[&str] = &[
    "curl", "wget", "nc", "ncat", "netcat", "socat", "telnet", "ssh", "scp", "sftp", "ftp", "tftp",
    "openssl", "http", "https", "xh", "sendmail", "mail", "mailx", "aws", "gsutil", "rclone",
];

/// Senders that transmit whatever arrives on their standard input.
pub(super) const STDIN_SENDERS: &[&str] = &[
    "nc", "ncat", "netcat", "socat", "telnet", "ssh", "openssl", "sendmail", "mail", "mailx",
    "ftp", "tftp",
];

const ENVIRONMENT_DUMPERS: &[&str] = &["env", "printenv", "set", "export", "declare", "compgen"];

fn is_remote(operand: &str) -> bool {
    if operand.starts_with("rsync://") {
        return true;
    }
    if operand.starts_with('/') || operand.starts_with('.') || operand.starts_with('~') {
        return false;
    }
    match (operand.find(':'), operand.find('/')) {
        (Some(colon), Some(slash)) => colon < slash,
        (Some(_), None) => true,
        _ => false,
    }
}

/// Whether a program sends data over the network.
pub(super) fn is_sender(program: &str) -> bool {
    NETWORK_SENDERS.contains(&program)
}

impl Watchdog<'_> {
    pub(super) fn check_pipeline(&self, pipeline: &Pipeline, findings: &mut Findings) {
        for (j, downstream) in pipeline.stages.iter().enumerate().skip(1) {
            let program = downstream.program();
            let upstream = &pipeline.stages[..j];
            let interprets = is_interpreter(program)
                || matches!(program, "source" | "." | "eval" | "csh" | "tcsh")
                || (downstream.argv.is_empty() && downstream.container);
            if interprets
                && let Some(source) = upstream.iter().find(|c| DOWNLOADERS.contains(&c.program()))
            {
                deny(
                    findings,
                    Category::DownloadExecute,
                    format!(
                        "{} pipes a download into {program}, which runs it",
                        code(&source.text()),
                        program = code(program),
                    ),
                );
            }
            if NETWORK_SENDERS.contains(&program) {
                if let Some(source) = upstream.iter().find(|c| {
                    ENVIRONMENT_DUMPERS.contains(&c.program()) && operands(&c.argv).is_empty()
                        || self.reads_secret(c)
                }) {
                    deny(
                        findings,
                        Category::Exfiltration,
                        format!(
                            "{} sends the output of {} (credentials or the environment) to \
                             the network",
                            code(&downstream.text()),
                            code(&source.text()),
                        ),
                    );
                } else if STDIN_SENDERS.contains(&program) || curl_reads_stdin(&downstream.argv) {
                    deny(
                        findings,
                        Category::Exfiltration,
                        format!(
                            "{} sends what it reads from the pipe to a network host",
                            code(&downstream.text()),
                        ),
                    );
                }
            }
        }
    }

    pub(super) fn check_exfiltration(
        &self,
        command: &SimpleCommand,
        position: usize,
        findings: &mut Findings,
    ) {
        let argv = &command.argv;
        match command.program() {
            "curl" => {
                if let Some(file) = curl_sent_file(argv) {
                    deny(
                        findings,
                        Category::Exfiltration,
                        format!("`curl` uploads the local file {}", code(&file)),
                    );
                } else if position > 0 && curl_reads_stdin(argv) {
                    deny(
                        findings,
                        Category::Exfiltration,
                        "`curl` uploads what it reads from the pipe".to_owned(),
                    );
                }
            }
            "wget" => {
                if let Some(arg) = argv
                    .iter()
                    .find(|a| a.starts_with("--post-file") || a.starts_with("--body-file"))
                {
                    deny(
                        findings,
                        Category::Exfiltration,
                        format!("{} uploads a local file", code(&format!("wget {arg}"))),
                    );
                }
            }
            "scp" | "rsync" | "sftp" => {
                let ops = operands(argv);
                if let Some(destination) = ops.last()
                    && ops.len() >= 2
                    && is_remote(destination)
                {
                    deny(
                        findings,
                        Category::Exfiltration,
                        format!(
                            "{} copies files to the remote host {}",
                            code(command.program()),
                            code(destination),
                        ),
                    );
                }
            }
            _ => {}
        }
        if self.reads_secret(command) {
            let sender = NETWORK_SENDERS.contains(&command.program());
            let finding = format!("{} reads a credential file", code(&command.text()));
            if sender {
                deny(findings, Category::Exfiltration, finding);
            } else {
                escalate(findings, Category::SecretRead, finding);
            }
        }
    }

    pub(super) fn reads_secret(&self, command: &SimpleCommand) -> bool {
        let redirected = command
            .redirects
            .iter()
            .filter(|r| r.reads())
            .map(|r| r.target.as_str());
        let arguments = command.argv.iter().skip(1).map(|a| {
            // `--data-binary @file`, `-F x=@file`, `of=...`
            a.rsplit(['@', '=']).next().unwrap_or(a)
        });
        arguments.chain(redirected).any(|word| {
            if word.is_empty() {
                return false;
            }
            let secret = |word: &str| {
                self.context
                    .place(word, &command.cwd)
                    .path()
                    .is_some_and(|p| self.is_secret(p))
            };
            // A glob is a credential read when it could match one on the file system.
            secret(word)
                || (crate::policy::read_only::has_glob(word)
                    && crate::policy::read_only::glob_matches(word, &command.cwd, &self.context)
                        .is_some_and(|found| found.iter().any(|p| p.to_str().is_some_and(secret))))
        })
    }

    /// A command that runs a file downloaded earlier in the same line.
    pub(super) fn check_runs_download(
        &self,
        command: &SimpleCommand,
        downloaded: &BTreeSet<String>,
        findings: &mut Findings,
    ) {
        if downloaded.is_empty() {
            return;
        }
        let program = command.program();
        let ran = if downloaded.contains(program) {
            Some(program.to_owned())
        } else if is_interpreter(program) || SHELLS.contains(&program) || program == "source" {
            operands(&command.argv)
                .first()
                .map(|s| base_name(s).to_owned())
                .filter(|s| downloaded.contains(s))
        } else if program == "chmod" && command.argv.iter().any(|a| a.contains("+x")) {
            operands(&command.argv)
                .iter()
                .map(|s| base_name(s).to_owned())
                .find(|s| downloaded.contains(s))
        } else {
            None
        };
        if let Some(file) = ran {
            deny(
                findings,
                Category::DownloadExecute,
                format!(
                    "{} runs {}, downloaded earlier in the same command",
                    code(&command.text()),
                    code(&file),
                ),
            );
        }
    }
}

/// File names a downloader writes.
pub(super) fn downloaded_files(command: &SimpleCommand) -> Vec<String> {
    let argv = &command.argv;
    let program = command.program();
    if !DOWNLOADERS.contains(&program) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let output_flags: &[&str] = if program == "wget" {
        &["-O", "--output-document"]
    } else {
        &["-o", "--output"]
    };
    for (i, arg) in argv.iter().enumerate() {
        if output_flags.contains(&arg.as_str()) {
            if let Some(file) = argv.get(i + 1) {
                out.push(base_name(file).to_owned());
            }
        } else if let Some(file) = output_flags
            .iter()
            .find_map(|f| arg.strip_prefix(&format!("{f}=")))
        {
            out.push(base_name(file).to_owned());
        } else if (program == "curl" && (arg == "-O" || arg == "--remote-name"))
            || (program == "wget" && !argv.iter().any(|a| a.starts_with("-O")))
        {
            for url in operands(argv) {
                let name = url.split(['?', '#']).next().unwrap_or(url);
                if let Some(last) = name.rsplit('/').next().filter(|l| !l.is_empty()) {
                    out.push(last.to_owned());
                }
            }
        }
    }
    for redirect in &command.redirects {
        if redirect.writes() {
            out.push(base_name(&redirect.target).to_owned());
        }
    }
    out
}

const CURL_DATA: &[&str] = &[
    "-d",
    "--data",
    "--data-binary",
    "--data-ascii",
    "--data-urlencode",
    "--json",
    "-F",
    "--form",
];

/// The values of curl's data and upload options.
fn curl_values(argv: &[String]) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let mut i = 1;
    while i < argv.len() {
        let arg = argv[i].as_str();
        for flag in CURL_DATA.iter().chain(&["-T", "--upload-file"]) {
            if arg == *flag {
                if let Some(value) = argv.get(i + 1) {
                    out.push((*flag, value.clone()));
                }
                i += 1;
                break;
            }
            if flag.starts_with("--") {
                if let Some(value) = arg.strip_prefix(&format!("{flag}=")) {
                    out.push((*flag, value.to_owned()));
                    break;
                }
            } else if let Some(value) = arg.strip_prefix(flag)
                && !value.is_empty()
            {
                out.push((*flag, value.to_owned()));
                break;
            }
        }
        i += 1;
    }
    out
}

/// The local file a curl command sends, if any.
fn curl_sent_file(argv: &[String]) -> Option<String> {
    curl_values(argv).into_iter().find_map(|(flag, value)| {
        let file = match flag {
            "-T" | "--upload-file" => Some(value.as_str()),
            "-F" | "--form" => value
                .split_once('=')
                .map(|(_, v)| v)
                .and_then(|v| v.strip_prefix('@').or_else(|| v.strip_prefix('<'))),
            "--data-urlencode" => value
                .strip_prefix('@')
                .or_else(|| value.split_once('@').map(|(_, f)| f)),
            _ => value.strip_prefix('@'),
        }?;
        (file != "-" && file != ".").then(|| file.to_owned())
    })
}

fn curl_reads_stdin(argv: &[String]) -> bool {
    curl_values(argv)
        .into_iter()
        .any(|(flag, value)| match flag {
            "-T" | "--upload-file" => value == "-" || value == ".",
            _ => value == "@-" || value.ends_with("=@-") || value.ends_with("=<-"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curl_uploads() {
        let argv = |s: &str| shell_words::split(s).unwrap();
        assert_eq!(
            curl_sent_file(&argv("curl -d @x.json u")).as_deref(),
            Some("x.json")
        );
        assert_eq!(
            curl_sent_file(&argv("curl --data-binary=@f u")).as_deref(),
            Some("f")
        );
        assert_eq!(
            curl_sent_file(&argv("curl -F a=@f u")).as_deref(),
            Some("f")
        );
        assert_eq!(curl_sent_file(&argv("curl -T f u")).as_deref(), Some("f"));
        assert_eq!(curl_sent_file(&argv("curl -d@f u")).as_deref(), Some("f"));
        assert_eq!(curl_sent_file(&argv("curl -d 'a=1' u")), None);
        assert!(curl_reads_stdin(&argv("curl -d @- u")));
        assert!(!curl_reads_stdin(&argv("curl u")));
    }

    #[test]
    fn remotes() {
        assert!(is_remote("user@host:/x"));
        assert!(is_remote("host:x"));
        assert!(is_remote("rsync://h/m"));
        assert!(!is_remote("./a:b"));
        assert!(!is_remote("dir/a:b"));
        assert!(!is_remote("/abs"));
    }
}
