//! Structural checks on simple commands: privileges, destruction, devices, git configuration,
//! work-discarding commands. The network checks are in [`super::network`].

use std::collections::BTreeSet;

use super::network::{STDIN_SENDERS, downloaded_files};
use super::{Finding, Watchdog, WatchdogCategory as Category};
use crate::policy::commands::read_only_words;
use crate::policy::pattern::base_name;
use crate::policy::shell::{Pipeline, Place, SimpleCommand, is_harmless_device};
use crate::policy::wrappers::PRIVILEGE_WRAPPERS;
use crate::tool::view::code;

pub(super) type Findings = Vec<(bool, Finding)>;

pub(super) fn deny(findings: &mut Findings, category: Category, reason: String) {
    findings.push((true, Finding { category, reason }));
}

pub(super) fn escalate(findings: &mut Findings, category: Category, reason: String) {
    findings.push((false, Finding { category, reason }));
}

const DISK_DEVICES: &[&str] = &[
    "/dev/sd",
    "/dev/hd",
    "/dev/vd",
    "/dev/xvd",
    "/dev/nvme",
    "/dev/mmcblk",
    "/dev/disk",
    "/dev/mapper/",
    "/dev/md",
    "/dev/dm-",
    "/dev/loop",
    "/dev/mem",
    "/dev/kmem",
    "/dev/port",
    "/dev/sg",
    "/dev/sr",
];

const DISK_TOOLS: &[&str] = &[
    "wipefs",
    "fdisk",
    "sfdisk",
    "cfdisk",
    "gdisk",
    "sgdisk",
    "parted",
    "mkswap",
    "blkdiscard",
    "badblocks",
];

/// Git configuration keys whose value is a program git runs (lower case; `*` is one segment).
const GIT_EXEC_KEYS: &[&str] = &[
    "core.pager",
    "core.editor",
    "core.sshcommand",
    "core.fsmonitor",
    "core.hookspath",
    "core.askpass",
    "core.gitproxy",
    "core.alternaterefscommand",
    "credential.helper",
    "credential.*.helper",
    "diff.external",
    "diff.*.textconv",
    "diff.*.command",
    "difftool.*.cmd",
    "mergetool.*.cmd",
    "merge.*.driver",
    "filter.*.clean",
    "filter.*.smudge",
    "filter.*.process",
    "alias.*",
    "pager.*",
    "sequence.editor",
    "gpg.program",
    "gpg.*.program",
    "interactive.difffilter",
    "uploadpack.packobjectshook",
    "remote.*.uploadpack",
    "remote.*.receivepack",
    "include.path",
    "includeif.*.path",
    "protocol.allow",
    "protocol.*.allow",
    "web.browser",
    "browser.*.cmd",
];

const GIT_EXEC_VARIABLES: &[&str] = &[
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_EXTERNAL_DIFF",
    "GIT_ASKPASS",
    "GIT_EXEC_PATH",
    "GIT_PROXY_COMMAND",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_TEMPLATE_DIR",
];

pub(super) fn is_git_exec_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    let parts: Vec<&str> = key.split('.').collect();
    GIT_EXEC_KEYS.iter().any(|pattern| {
        let pattern: Vec<&str> = pattern.split('.').collect();
        match (pattern.as_slice(), parts.as_slice()) {
            // `alias.*` / `pager.*`: any name after the section.
            ([section, "*"], [s, ..]) if parts.len() >= 2 => section == s,
            // `diff.*.textconv`: a subsection of any (dotted) name.
            ([section, "*", name], [s, .., n]) if parts.len() >= 3 => section == s && name == n,
            _ => pattern == parts,
        }
    })
}

/// Positional operands (after `--`, everything).
pub(super) fn operands(argv: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = false;
    for arg in argv.iter().skip(1) {
        if rest {
            out.push(arg.as_str());
        } else if arg == "--" {
            rest = true;
        } else if !arg.starts_with('-') || arg == "-" {
            out.push(arg.as_str());
        }
    }
    out
}

fn has_short_flag(argv: &[String], letters: &[char], long: &[&str]) -> bool {
    argv.iter().skip(1).any(|a| {
        long.contains(&a.as_str())
            || (a.starts_with('-') && !a.starts_with("--") && a[1..].contains(letters))
    })
}

impl Watchdog<'_> {
    pub(super) fn check_pipelines(&self, pipelines: &[Pipeline], findings: &mut Findings) {
        let mut downloaded: BTreeSet<String> = BTreeSet::new();
        for pipeline in pipelines {
            for (position, command) in pipeline.stages.iter().enumerate() {
                self.check_command(command, position, findings);
                self.check_runs_download(command, &downloaded, findings);
                downloaded.extend(downloaded_files(command));
            }
            self.check_pipeline(pipeline, findings);
        }
    }

    fn check_command(&self, command: &SimpleCommand, position: usize, findings: &mut Findings) {
        let argv = &command.argv;
        let program = command.program();
        self.check_privileges(command, findings);
        self.check_redirects_and_assignments(command, findings);
        if program == "git" {
            self.check_git(argv, findings);
        }
        let mutating = !read_only_words(argv);
        self.check_disks(command, mutating, findings);
        self.check_operands(command, findings);
        if mutating {
            self.check_protected_places(command, findings);
        }
        self.check_exfiltration(command, position, findings);
        self.check_risky(command, findings);
    }

    /// Privilege escalation: a wrapper or a program that runs with other privileges.
    fn check_privileges(&self, command: &SimpleCommand, findings: &mut Findings) {
        let program = command.program();
        if let Some(wrapper) = command
            .wrappers
            .iter()
            .find(|w| PRIVILEGE_WRAPPERS.contains(&base_name(w)))
        {
            deny(
                findings,
                Category::PrivilegeEscalation,
                format!(
                    "{wrapper} runs a command with other privileges",
                    wrapper = code(wrapper)
                ),
            );
        }
        if matches!(
            program,
            "sudo" | "su" | "doas" | "pkexec" | "run0" | "runuser" | "setcap" | "visudo" | "chroot"
        ) {
            deny(
                findings,
                Category::PrivilegeEscalation,
                format!("{program} changes privileges", program = code(program)),
            );
        }
    }

    /// Redirections that write protected files or send files to the network, and assignments
    /// that make git run a program.
    fn check_redirects_and_assignments(&self, command: &SimpleCommand, findings: &mut Findings) {
        let program = command.program();
        for redirect in &command.redirects {
            if redirect.writes() && !redirect.dynamic {
                self.check_written(&redirect.target, command, findings);
            }
            if redirect.reads()
                && STDIN_SENDERS.contains(&program)
                && !is_harmless_device(&redirect.target)
            {
                deny(
                    findings,
                    Category::Exfiltration,
                    format!(
                        "{} sends the file {} to a network host",
                        code(&command.text()),
                        code(&redirect.target),
                    ),
                );
            }
        }
        // Git configuration that executes.
        for (name, _) in &command.assignments {
            if GIT_EXEC_VARIABLES.contains(&name.to_ascii_uppercase().as_str()) {
                deny(
                    findings,
                    Category::GitConfigExecution,
                    format!(
                        "{name} makes git run a program of the caller's choice",
                        name = code(name)
                    ),
                );
            }
        }
    }

    /// Formatting or writing a disk device.
    fn check_disks(&self, command: &SimpleCommand, mutating: bool, findings: &mut Findings) {
        let argv = &command.argv;
        let program = command.program();
        if program.starts_with("mkfs") || DISK_TOOLS.contains(&program) {
            deny(
                findings,
                Category::DeviceWrite,
                format!(
                    "{program} formats or repartitions a disk",
                    program = code(program)
                ),
            );
        }
        if mutating {
            for operand in operands(argv) {
                if DISK_DEVICES.iter().any(|d| operand.starts_with(d)) {
                    deny(
                        findings,
                        Category::DeviceWrite,
                        format!(
                            "{} touches the disk device {}",
                            code(&command.text()),
                            code(operand)
                        ),
                    );
                }
            }
        }
    }

    /// What the program destroys, changes the permissions of, or writes, by its operands.
    fn check_operands(&self, command: &SimpleCommand, findings: &mut Findings) {
        let argv = &command.argv;
        let program = command.program();
        match program {
            "rm" | "rmdir" | "unlink" | "shred" | "truncate" | "srm" => {
                self.check_destroys(command, &operands(argv), findings);
            }
            "mv" => {
                let ops = operands(argv);
                if ops.len() >= 2 {
                    self.check_destroys(command, &ops[..ops.len() - 1], findings);
                }
                if let Some(target) = ops.last() {
                    self.check_written(target, command, findings);
                }
            }
            "chmod" | "chown" | "chgrp" => self.check_permissions(command, findings),
            "find" => self.check_find(command, findings),
            "dd" => {
                for arg in argv.iter().skip(1) {
                    if let Some(target) = arg.strip_prefix("of=") {
                        if target.starts_with("/dev/") && !is_harmless_device(target) {
                            deny(
                                findings,
                                Category::DeviceWrite,
                                format!("`dd` writes to the device {}", code(target)),
                            );
                        } else {
                            self.check_destroys(command, &[target], findings);
                        }
                    }
                }
            }
            "cp" | "ln" | "install" | "tee" | "touch" | "mkdir" | "sed" | "perl" | "rsync"
            | "scp" | "patch" | "vim" | "vi" | "nano" | "emacs" | "code" => {
                for operand in operands(argv) {
                    self.check_written(operand, command, findings);
                }
            }
            _ => {}
        }
    }

    /// A command that may change things, run inside Keel's own state (`git -C .keel init`,
    /// `cd ~/.config/keel && git init`), changes it whatever its operands say; and its operands
    /// and `--option=value` values that name a protected path.
    fn check_protected_places(&self, command: &SimpleCommand, findings: &mut Findings) {
        let argv = &command.argv;
        let program = command.program();
        // The directories it runs in: its working directory, and those it is pointed at
        // with `-C DIR`, `--git-dir`, `--work-tree` (peeled off the key, not the effect).
        let mut dirs = vec![".".to_owned()];
        let words = &command.original;
        for (i, word) in words.iter().enumerate() {
            match word.as_str() {
                "-C" | "--git-dir" | "--work-tree" | "--directory" => {
                    dirs.extend(words.get(i + 1).cloned());
                }
                _ => {
                    for option in ["--git-dir=", "--work-tree=", "--directory="] {
                        dirs.extend(word.strip_prefix(option).map(str::to_owned));
                    }
                }
            }
        }
        for dir in &dirs {
            if let Some(path) = self.context.place(dir, &command.cwd).path()
                && let Some(finding) = self.protected_path(path)
                && !findings.iter().any(|(_, f)| *f == finding)
            {
                findings.push((true, finding));
            }
        }
        if program != "rm" {
            // Positional operands, and the values of `--option=value` words
            // (`git log --output=~/.bashrc`).
            let values = argv.iter().skip(1).filter_map(|a| {
                a.strip_prefix("--")
                    .and_then(|rest| rest.split_once('='))
                    .map(|(_, value)| value)
            });
            for operand in operands(argv).into_iter().chain(values) {
                if let Some(path) = self.context.place(operand, &command.cwd).path()
                    && let Some(finding) = self.protected_path(path)
                    && !findings.iter().any(|(_, f)| *f == finding)
                {
                    findings.push((true, finding));
                }
            }
        }
    }

    /// A path a command writes to: protected files and devices are refused.
    fn check_written(&self, target: &str, command: &SimpleCommand, findings: &mut Findings) {
        if target.starts_with("/dev/") {
            if !is_harmless_device(target) {
                deny(
                    findings,
                    Category::DeviceWrite,
                    format!(
                        "{} writes to the device {}",
                        code(&command.text()),
                        code(target)
                    ),
                );
            }
            return;
        }
        let place = self.context.place(target, &command.cwd);
        if let Some(path) = place.path()
            && let Some(finding) = self.protected_path(path)
        {
            if !findings.iter().any(|(_, f)| *f == finding) {
                findings.push((true, finding));
            }
            return;
        }
        // A file other programs run on their own (`> .envrc`, `cp x .vscode/tasks.json`):
        // asked every time, as for the file tools.
        if let Some(path) = place.path()
            && let Some(finding) = self.auto_run_path(path)
        {
            if !findings.iter().any(|(_, f)| *f == finding) {
                findings.push((false, finding));
            }
            return;
        }
        if let Place::Outside(path) = place {
            escalate(
                findings,
                Category::Destruction,
                format!(
                    "{} writes to {}, outside the workspace",
                    code(&command.text()),
                    code(&path.display().to_string()),
                ),
            );
        }
    }

    /// Operands a command deletes or clobbers.
    fn check_destroys(&self, command: &SimpleCommand, targets: &[&str], findings: &mut Findings) {
        let program = command.program();
        if program == "shred" || program == "srm" {
            deny(
                findings,
                Category::Destruction,
                format!(
                    "{program} destroys file contents beyond recovery",
                    program = code(program)
                ),
            );
            return;
        }
        for target in targets {
            let place = self.context.place(target, &command.cwd);
            if let Some(finding) = place.path().and_then(|p| self.protected_path(p)) {
                if !findings.iter().any(|(_, f)| *f == finding) {
                    findings.push((true, finding));
                }
                continue;
            }
            match place {
                Place::Outside(path) => deny(
                    findings,
                    Category::Destruction,
                    format!(
                        "{} would delete or overwrite {}, outside the workspace",
                        code(&command.text()),
                        code(&path.display().to_string()),
                    ),
                ),
                Place::Root(path) if target.contains(['*', '?']) => escalate(
                    findings,
                    Category::Destruction,
                    format!(
                        "{} deletes everything in the workspace root {}",
                        code(&command.text()),
                        code(&path.display().to_string()),
                    ),
                ),
                Place::Root(path) => deny(
                    findings,
                    Category::Destruction,
                    format!(
                        "{} would delete the whole workspace {}",
                        code(&command.text()),
                        code(&path.display().to_string()),
                    ),
                ),
                Place::Inside(_) => {}
                Place::Unknown => escalate(
                    findings,
                    Category::Destruction,
                    format!(
                        "cannot tell what {} deletes ({target} is computed)",
                        code(&command.text()),
                        target = code(target),
                    ),
                ),
            }
        }
    }

    fn check_permissions(&self, command: &SimpleCommand, findings: &mut Findings) {
        let argv = &command.argv;
        let ops = operands(argv);
        let Some((mode, targets)) = ops.split_first() else {
            return;
        };
        if command.program() == "chmod" && is_setuid_mode(mode) {
            deny(
                findings,
                Category::PrivilegeEscalation,
                format!(
                    "{} sets the setuid/setgid bit",
                    code(&format!("chmod {mode}"))
                ),
            );
        }
        let recursive = has_short_flag(argv, &['R'], &["--recursive"]);
        for target in targets {
            match self.context.place(target, &command.cwd) {
                Place::Outside(path) => {
                    let home = self.context.home.is_some_and(|h| h == path);
                    let finding = format!(
                        "{} changes permissions of {}, outside the workspace",
                        code(&command.text()),
                        code(&path.display().to_string()),
                    );
                    if recursive || home || path.parent().is_none() {
                        deny(findings, Category::Destruction, finding);
                    } else {
                        escalate(findings, Category::Destruction, finding);
                    }
                }
                Place::Unknown if recursive => escalate(
                    findings,
                    Category::Destruction,
                    format!("cannot tell what {} changes", code(&command.text())),
                ),
                _ => {}
            }
        }
    }

    fn check_find(&self, command: &SimpleCommand, findings: &mut Findings) {
        let argv = &command.argv;
        let destructive = argv.iter().enumerate().any(|(i, a)| {
            a == "-delete"
                || (matches!(a.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir")
                    && argv.get(i + 1).is_some_and(|next| {
                        matches!(
                            base_name(next),
                            "rm" | "shred" | "unlink" | "mv" | "truncate" | "chmod" | "chown"
                        )
                    }))
        });
        if !destructive {
            return;
        }
        let starts: Vec<&str> = argv
            .iter()
            .skip(1)
            .take_while(|a| !a.starts_with('-') && *a != "(" && *a != "!")
            .map(String::as_str)
            .collect();
        let starts = if starts.is_empty() { vec!["."] } else { starts };
        for start in starts {
            match self.context.place(start, &command.cwd) {
                Place::Outside(path) => deny(
                    findings,
                    Category::Destruction,
                    format!(
                        "{} deletes files under {}, outside the workspace",
                        code(&command.text()),
                        code(&path.display().to_string()),
                    ),
                ),
                Place::Unknown => escalate(
                    findings,
                    Category::Destruction,
                    format!("cannot tell where {} deletes", code(&command.text())),
                ),
                _ => {}
            }
        }
    }

    fn check_git(&self, argv: &[String], findings: &mut Findings) {
        let mut i = 1;
        while i < argv.len() {
            let arg = argv[i].as_str();
            let setting = if arg == "-c" {
                i += 1;
                argv.get(i).map(String::as_str)
            } else if let Some(rest) = arg.strip_prefix("--config-env=") {
                Some(rest)
            } else if arg == "--config-env" {
                i += 1;
                argv.get(i).map(String::as_str)
            } else if arg.starts_with("-c") && arg.len() > 2 {
                Some(&arg[2..])
            } else {
                None
            };
            if let Some(setting) = setting {
                let key = setting.split('=').next().unwrap_or(setting);
                if is_git_exec_key(key) {
                    deny(
                        findings,
                        Category::GitConfigExecution,
                        format!(
                            "{} makes git run a program of the caller's choice",
                            code(&format!("git -c {key}=..."))
                        ),
                    );
                }
            }
            if arg.starts_with("--exec-path=") {
                deny(
                    findings,
                    Category::GitConfigExecution,
                    "`git --exec-path` makes git run programs from another directory".to_owned(),
                );
            }
            if let Some(option) = git_program_option(arg) {
                deny(
                    findings,
                    Category::GitConfigExecution,
                    format!(
                        "{arg} ({option}) makes git run a program of the caller's choice",
                        arg = code(arg)
                    ),
                );
            }
            i += 1;
        }
        let ops = operands(argv);
        // The short spellings of the same options: `git ls-remote -u PROGRAM`, `git clone -u`.
        if matches!(ops.first().copied(), Some("ls-remote" | "clone"))
            && argv
                .iter()
                .any(|a| a == "-u" || (a.starts_with("-u") && !a.starts_with("--")))
        {
            deny(
                findings,
                Category::GitConfigExecution,
                "`-u` (--upload-pack) makes git run a program of the caller's choice".to_owned(),
            );
        }
        match ops.first().copied() {
            Some("clone") if argv.iter().any(|a| a == "-u") => deny(
                findings,
                Category::GitConfigExecution,
                "`git clone -u` runs a program of the caller's choice".to_owned(),
            ),
            Some("config") => {
                let mut keys = ops[1..]
                    .iter()
                    .filter(|k| !matches!(**k, "set" | "get" | "unset" | "list"));
                let key = keys.next();
                let has_value = keys.next().is_some()
                    || argv.iter().any(|a| a == "--add" || a == "--replace-all");
                if let Some(key) = key
                    && has_value
                    && is_git_exec_key(key)
                {
                    deny(
                        findings,
                        Category::GitConfigExecution,
                        format!(
                            "{} would make git run a program",
                            code(&format!("git config {key}"))
                        ),
                    );
                }
            }
            _ => {}
        }
    }

    fn check_risky(&self, command: &SimpleCommand, findings: &mut Findings) {
        if command.program() != "git" {
            return;
        }
        let argv = &command.argv;
        let ops = operands(argv);
        let risky = match ops.first().copied() {
            Some("push") => {
                argv.iter().any(|a| {
                    matches!(
                        a.as_str(),
                        "-f" | "--force" | "--mirror" | "--delete" | "-d"
                    ) || a.starts_with("--force-with-lease")
                }) || ops
                    .iter()
                    .skip(2)
                    .any(|r| r.starts_with('+') || r.starts_with(':'))
            }
            Some("reset") => argv.iter().any(|a| a == "--hard"),
            Some("clean") => has_short_flag(argv, &['f'], &["--force"]),
            Some("filter-branch" | "filter-repo") => true,
            _ => false,
        };
        if risky {
            escalate(
                findings,
                Category::RiskyCommand,
                format!(
                    "{} can discard work that cannot be recovered",
                    code(&command.text()),
                ),
            );
        }
    }
}

fn is_setuid_mode(mode: &str) -> bool {
    if mode.chars().all(|c| c.is_ascii_digit()) {
        return mode.len() == 4
            && mode
                .chars()
                .next()
                .and_then(|c| c.to_digit(8))
                .is_some_and(|d| d & 6 != 0);
    }
    mode.split(',').any(|clause| {
        clause
            .split_once(['+', '='])
            .is_some_and(|(_, perms)| perms.contains('s'))
    })
}

/// The program-valued long option of git's that `arg` spells, as git reads it: its subcommands
/// take any unambiguous prefix of a long option (`--upl=CMD` is `--upload-pack=CMD`), so an
/// option is matched by identity, not by spelling. A prefix too short to be unambiguous makes
/// git refuse the line, so denying it costs nothing.
fn git_program_option(arg: &str) -> Option<&'static str> {
    const PROGRAM_OPTIONS: &[(&str, usize)] = &[
        // (option, shortest prefix taken as it)
        ("--upload-pack", 4),
        ("--receive-pack", 4),
        // `git push --exec`, `git archive --exec`, `git fetch-pack --exec`.
        ("--exec", 4),
    ];
    let name = arg.split('=').next().unwrap_or(arg);
    if !name.starts_with("--") || name == "--exec-path" {
        return None;
    }
    PROGRAM_OPTIONS
        .iter()
        .find(|(option, shortest)| name.len() >= *shortest && option.starts_with(name))
        .map(|(option, _)| *option)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_exec_keys() {
        for key in [
            "core.pager",
            "core.sshCommand",
            "alias.x",
            "diff.foo.textconv",
            "filter.lfs.smudge",
            "includeIf.gitdir:~/x.path",
        ] {
            assert!(is_git_exec_key(key), "{key}");
        }
        for key in ["user.name", "core.autocrlf", "diff.renames"] {
            assert!(!is_git_exec_key(key), "{key}");
        }
    }

    #[test]
    fn setuid_modes() {
        for mode in ["u+s", "4755", "2755", "g+s", "a=rwxs", "+s"] {
            assert!(is_setuid_mode(mode), "{mode}");
        }
        for mode in ["755", "0755", "u+x", "go-w", "1777"] {
            assert!(!is_setuid_mode(mode), "{mode}");
        }
    }
}
